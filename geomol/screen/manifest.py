"""The resume record of a screen: what it screens (``manifest.json``) and which shards are done (``shards.jsonl``).

``manifest.json`` is written once when a screen starts in an empty folder (and rewritten with the totals
at the end); a rerun into the same folder must have the same fingerprint (same inputs and settings),
else it stops with a :class:`~geomol.errors.ConfigError` instead of mixing two screens.

``shards.jsonl`` gets one JSON line per completed shard, appended and flushed after the shard's files
are in place (written atomically), so after any interruption every line names a shard whose files are
complete. A line cut short by a crash is ignored. A rerun skips exactly the recorded shards whose
digest matches the library's shard of the same number, and redoes the others.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from geomol.data.store.cache import atomic_write_text
from geomol.errors import ConfigError
from geomol.screen.outputs import OutputFolder

__all__ = ["ShardRecord", "Manifest"]

MANIFEST_VERSION = 1


@dataclass(frozen=True)
class ShardRecord:
    """One completed shard: number, digest of its entries, counts, CPU seconds per stage, worker and its peak memory."""

    number: int
    digest: str
    ligands: int
    scored: int
    failed: int
    docked: int
    seconds: dict
    worker: str
    peak_rss_mb: float

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


class Manifest:
    """The manifest of the screen in ``folder``: opened (checked against ``description``) or created.

    Args:
        folder: the screen's :class:`~geomol.screen.outputs.OutputFolder`.
        description: :meth:`~geomol.screen.settings.ScreenInputs.describe` plus the library's name and size.

    Raises:
        ConfigError: the folder holds a screen with another fingerprint, or an unreadable manifest.
    """

    def __init__(self, folder: OutputFolder, description: dict[str, Any]):
        self.folder = folder
        self.description = dict(description)
        if folder.manifest.exists():
            self._check_same(self._read())
        else:
            folder.root.mkdir(parents=True, exist_ok=True)
            self.write()
        self.completed: dict[int, ShardRecord] = self._completed()

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads(self.folder.manifest.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"unreadable screen manifest ({exc}); use another --out",
                              source=self.folder.manifest) from None

    def _check_same(self, earlier: dict[str, Any]) -> None:
        fingerprint = earlier.get("screen", {}).get("fingerprint")
        if fingerprint != self.description["fingerprint"] or earlier.get("library") != self.description["library"]:
            changed = [k for k in ("receptor_sha256", "reference_sha256", "model_sha256", "settings")
                       if earlier.get("screen", {}).get(k) != self.description.get(k)]
            if earlier.get("library") != self.description["library"]:
                changed.append("library")
            raise ConfigError(f"the folder holds a screen of other inputs or settings (changed: "
                              f"{', '.join(changed) or 'fingerprint'}); rerun the same command to resume, or "
                              "give another --out", source=self.folder.root)

    def write(self, totals: dict[str, Any] | None = None) -> None:
        """Write ``manifest.json`` (atomically), with the run's totals once it is complete."""
        record = {"version": MANIFEST_VERSION, "screen": {k: v for k, v in self.description.items() if k != "library"},
                  "library": self.description["library"]}
        if totals is not None:
            record["totals"] = totals
        atomic_write_text(self.folder.manifest, json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")

    def _completed(self) -> dict[int, ShardRecord]:
        done: dict[int, ShardRecord] = {}
        if not self.folder.shard_log.exists():
            return done
        with open(self.folder.shard_log, "rb+") as handle:  # end a line cut short, so the next one starts clean
            size = handle.seek(0, os.SEEK_END)
            if size:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
        with open(self.folder.shard_log, encoding="utf-8") as handle:
            for line in handle:
                try:
                    record = ShardRecord(**json.loads(line))
                except (ValueError, TypeError):
                    continue  # a line cut short by an interruption: that shard is redone
                done[record.number] = record
        return done

    def is_done(self, number: int, digest: str) -> bool:
        """True when shard ``number`` was completed on the same entries and its files are still there."""
        record = self.completed.get(number)
        return (record is not None and record.digest == digest and self.folder.shard_table(number).exists()
                and self.folder.shard_poses(number).exists())

    def add(self, record: ShardRecord) -> None:
        """Record a completed shard (its files must already be in place)."""
        with open(self.folder.shard_log, "a", encoding="utf-8") as handle:
            handle.write(record.to_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.completed[record.number] = record
