"""Frames of a running simulation kept in chunk files, assembled into one npz when the run stops.

Layout (``work``: a folder beside the output file)::

    <out>.npz                        frames [0, k) of earlier sessions (and whatever metadata)
    <work>/frames_<a>_<b>.npz        frames [a, b) written since, one file per checkpoint

Every file is written under a temporary name and renamed, so a killed process leaves whole files.
Reading takes the output's frames, then from frame k on the chunk that starts there and reaches
furthest, and so on; chunks that this cover skips (left over from an assembly that was killed
before it tidied up) are ignored and removed on the next assembly.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from geomol.errors import DatasetError

__all__ = ["FrameChunks", "save_npz_atomic"]

_CHUNK = re.compile(r"frames_(\d+)_(\d+)\.npz$")


def save_npz_atomic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` under a temporary name, then an atomic rename (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


class FrameChunks:
    """The per-frame arrays (keys ``per_frame``) of one run, split between the output file and chunks.

    Args:
        out: the assembled npz. work: folder of the chunks. per_frame: names of the arrays whose first
            axis is the frame.
    """

    def __init__(self, out: Path, work: Path, per_frame: tuple[str, ...]):
        self.out, self.work, self.per_frame = Path(out), Path(work), per_frame

    def _out_frames(self) -> int:
        if not self.out.exists():
            return 0
        try:
            with np.load(self.out) as data:
                return len(data[self.per_frame[0]])
        except (OSError, ValueError, KeyError) as exc:
            raise DatasetError(f"unreadable output of an earlier run ({exc}); move it away to start over",
                               source=self.out) from exc

    def _chunks(self) -> list[tuple[int, int, Path]]:
        if not self.work.is_dir():
            return []
        found = [(int(m.group(1)), int(m.group(2)), p) for p in self.work.iterdir() if (m := _CHUNK.match(p.name))]
        return sorted(found)

    def _cover(self) -> tuple[int, list[tuple[int, int, Path]], list[Path]]:
        """(frames in the output, chunks that continue it without gaps, chunks left over)."""
        position = base = self._out_frames()
        used, chunks = [], self._chunks()
        while True:
            here = [c for c in chunks if c[0] == position and c[1] > position]
            if not here:
                break
            best = max(here, key=lambda c: c[1])
            used.append(best)
            position = best[1]
        unused = [c[2] for c in chunks if c not in used]
        return base, used, unused

    def frames(self) -> int:
        """Frames stored (output file and chunks)."""
        base, used, _ = self._cover()
        return used[-1][1] if used else base

    def write(self, first: int, arrays: dict[str, np.ndarray]) -> None:
        """Store frames [first, first + len) as one chunk."""
        count = len(arrays[self.per_frame[0]])
        save_npz_atomic(self.work / f"frames_{first:09d}_{first + count:09d}.npz", arrays)

    def drop_after(self, frames: int) -> None:
        """Remove chunks that start at or after ``frames`` (written after the last checkpoint)."""
        for start, _, path in self._chunks():
            if start >= frames:
                path.unlink()

    def read(self, frames: int) -> dict[str, np.ndarray]:
        """The first ``frames`` frames of every per-frame array.

        Raises:
            DatasetError: fewer frames are stored (the chunks were deleted or the output replaced).
        """
        base, used, _ = self._cover()
        parts: dict[str, list[np.ndarray]] = {key: [] for key in self.per_frame}
        sources = ([self.out] if base else []) + [path for _, _, path in used]
        for source in sources:
            with np.load(source) as data:
                for key in self.per_frame:
                    parts[key].append(np.asarray(data[key]))
        stored = used[-1][1] if used else base
        if stored < frames:
            raise DatasetError(f"{stored} frames stored but the checkpoint is at frame {frames}; the chunks in "
                               f"{self.work} are incomplete: move the output and the folder away to start over",
                               source=self.out)
        return {key: np.concatenate(parts[key])[:frames] for key in self.per_frame}

    def assemble(self, frames: int, metadata: dict[str, np.ndarray]) -> None:
        """Write the output file with the first ``frames`` frames and ``metadata``, then remove the chunks."""
        arrays = self.read(frames)
        save_npz_atomic(self.out, {**arrays, **metadata})
        for _, _, path in self._chunks():
            path.unlink()
