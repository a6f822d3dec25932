"""The summary JSON a simulation writes next to its data (settings, frames, speed, provenance)."""
from __future__ import annotations

import json
from pathlib import Path

from geomol.data.store.cache import atomic_write_text

__all__ = ["write_summary", "read_summary"]


def write_summary(path: Path, summary: dict) -> None:
    """Write ``summary`` with the provenance record (command, commit, versions, machine load)."""
    from geomol.provenance import provenance

    atomic_write_text(path, json.dumps({**summary, "provenance": provenance()}, indent=1) + "\n")


def read_summary(path: Path) -> dict | None:
    """An earlier summary, or None when there is none (or it is unreadable)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
