"""The summary JSON a simulation writes next to its data (settings, frames, speed, provenance)."""
from __future__ import annotations

import json
from pathlib import Path

from geomol.data.store.cache import atomic_write_text

__all__ = ["write_summary", "read_summary", "simulated_time", "speed"]

MIN_TIMED_SECONDS = 10.0
"""Wall seconds under which a run's speed is not reported (start-up and timer noise dominate)."""


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


def simulated_time(ps: float) -> str:
    """Simulated time in the unit that reads best: ``'120 fs'``, ``'4.00 ps'``, ``'1.50 ns'``."""
    if ps < 1.0:
        return f"{ps * 1e3:.3g} fs"
    return f"{ps:.3g} ps" if ps < 1e3 else f"{ps * 1e-3:.3g} ns"


def speed(ps: float, wall_seconds: float) -> str:
    """Simulated time per day of wall time (``'207 ns/day'``), or why a run too short to time has none."""
    if wall_seconds < MIN_TIMED_SECONDS:
        return f"too short to time ({wall_seconds:.2g} s of wall time)"
    per_day = ps * 86400 / wall_seconds
    return f"{per_day * 1e-3:.3g} ns/day" if per_day >= 1e3 else f"{per_day:.3g} ps/day"
