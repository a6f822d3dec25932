"""What a file rollout writes: the trajectory (streamed frame by frame to any format MDAnalysis writes) and its record.

:class:`FrameWriter` streams frames of an atom group to a multi-frame file; coordinate-only formats (DCD, XTC, TRR,
NetCDF) get a PDB of the atoms beside them (``<out stem>_topology.pdb``) so that VMD, PyMOL and MDAnalysis open the
pair. :class:`TrajectoryRollout` is what :func:`geomol.rollout` returns, for MD selections and small molecules alike.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from geomol.errors import ConfigError

__all__ = ["TrajectoryRollout", "FrameWriter"]

_WITH_TOPOLOGY = {"PDB", "ENT", "MOL2", "XYZ"}  # multi-frame formats that carry atom names themselves


@dataclass
class TrajectoryRollout:
    """What a file rollout wrote.

    Attributes:
        out: the trajectory file. topology_file: the PDB of the selection written beside it (or None).
        frames: [F] trajectory frame number of each written frame (start frame + offset).
        times_ps: [F] their times (start time + offset × the input's frame interval).
        windows: model calls made (fewer than asked if the rollout diverged).
        summary: the JSON-ready record (also written to ``summary_file``).
        rmsd: [F_pred] RMSD (Å, no superposition) of the predicted frames to the reference, or None.
        chemistry: the summary's ``"chemistry"`` record (bond-length and angle errors, broken bonds,
            clashes of the predicted frames against the start frame; :mod:`geomol.inference.dynamics.rollout_chemistry`).
    """

    out: Path
    topology_file: Path | None
    frames: np.ndarray
    times_ps: np.ndarray
    windows: int
    summary: dict[str, Any] = field(default_factory=dict)
    rmsd: np.ndarray | None = None
    chemistry: dict[str, Any] = field(default_factory=dict)
    summary_file: Path | None = None
    plot_file: Path | None = None


class FrameWriter:
    """Stream frames of ``atoms`` to ``out`` in any multi-frame format MDAnalysis writes (context manager)."""

    def __init__(self, out: str | os.PathLike, atoms, write_topology: bool = True):
        import MDAnalysis as mda
        from MDAnalysis.coordinates.core import get_writer_for

        self.out = Path(out)
        try:
            writer_format = get_writer_for(str(out), multiframe=True).format
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"MDAnalysis has no trajectory writer for this file name: {exc}", source=out) from None
        formats = {writer_format} if isinstance(writer_format, str) else set(writer_format)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._frame = mda.Merge(atoms)  # a one-frame copy of the selection: its own topology and timestep
        self.topology_file = None
        if write_topology and not formats & _WITH_TOPOLOGY:
            self.topology_file = self.out.with_name(f"{self.out.stem}_topology.pdb")
            self._write_pdb(self.topology_file)
        self._writer = mda.Writer(str(out), n_atoms=len(atoms))

    def _write_pdb(self, path: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PDB writer warns about missing optional attributes
            self._frame.atoms.write(str(path))

    def write(self, positions: np.ndarray, time_ps: float, frame: int) -> None:
        ts = self._frame.trajectory.ts
        self._frame.atoms.positions = positions
        ts.time, ts.frame = float(time_ps), int(frame)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._writer.write(self._frame.atoms)

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> "FrameWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
