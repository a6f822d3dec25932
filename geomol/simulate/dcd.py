"""Appending to a DCD written by OpenMM, after cutting it back to the frames of the last checkpoint.

A run killed between two checkpoints may have written frames after the checkpoint (or half a frame);
:func:`open_dcd_for_append` truncates the file to the checkpoint's frame count and corrects the header,
so that the continued run writes exactly the frames an uninterrupted run would have.
"""
from __future__ import annotations

import struct
from pathlib import Path

from geomol.errors import TrajectoryError

__all__ = ["dcd_layout", "open_dcd_for_append"]


def dcd_layout(path: Path) -> tuple[int, int, int, int]:
    """(header bytes, frame bytes, atoms, frames in the header) of a DCD written by OpenMM (no unit cell)."""
    with open(path, "rb") as handle:
        head = handle.read(100)
        if len(head) < 100 or head[4:8] != b"CORD" or struct.unpack("<i", head[:4])[0] != 84:
            raise TrajectoryError("not a DCD file written by this generator (bad header)", source=path)
        frames = struct.unpack("<i", head[8:12])[0]
        box_flag = struct.unpack("<i", head[48:52])[0]
        handle.seek(92)
        comment_bytes = struct.unpack("<i", handle.read(4))[0]
        handle.seek(104 + comment_bytes)
        atoms = struct.unpack("<i", handle.read(4))[0]
    if box_flag:
        raise TrajectoryError("a periodic DCD cannot be continued by this generator", source=path)
    return 104 + comment_bytes + 8, 3 * (4 * atoms + 8), atoms, frames


def open_dcd_for_append(path: Path, frames: int):
    """The DCD opened for appending (``r+b``), cut back to its first ``frames`` frames.

    Raises:
        TrajectoryError: the file holds fewer than ``frames`` whole frames.
    """
    header, frame_bytes, _, _ = dcd_layout(path)
    size = path.stat().st_size
    whole = (size - header) // frame_bytes
    if whole < frames:
        raise TrajectoryError(f"holds {whole} whole frames but the checkpoint is at frame {frames}; move the "
                              f"trajectory and its work folder away to start over", source=path)
    handle = open(path, "r+b")
    handle.truncate(header + frames * frame_bytes)
    handle.seek(8)
    handle.write(struct.pack("<i", frames))
    handle.flush()
    return handle
