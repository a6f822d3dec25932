"""Windows of small-molecule trajectories, one molecule or many, for models that read the molecule they are given.

A :class:`MoleculeTrajectory` is the heavy atoms of one run: atomic numbers, heavy-atom bonds (from the file, e.g.
the ``bonds`` of a ``geomol simulate`` npz, else perceived from the first frame) and frames [F, n, 3] in Å.
:class:`MoleculeWindows` cuts windows out of one or several of them. The item of start frame t, for target offsets
o_1 … o_P and velocity span s (frames), is

* ``X`` = x[t] and ``V`` = x[t] − x[t − s] (Å per s frames: the backward difference over the window's own frame
  spacing, which is exactly what a rollout has at the end of a predicted window when s = o_P − o_{P−1});
* ``X_target`` [n, P, 3] = x[t + o_p];
* the molecule's graph from :func:`~geomol.data.chemistry.molecule_graph.molecule_graph` (complete within the molecule).

Splits are in time within each trajectory: the frames [begin, end) of a ``frame_range`` (fractions of the run) hold
a window's input, its previous frame and all its targets, so windows of two ranges never share a frame.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from geomol.data.chemistry.covalent_graph import perceive_bonds
from geomol.data.datasets.trajectories.trajectory import displacement_scale, trajectory_graph
from geomol.data.chemistry.molecule_graph import heavy_atom_graph, molecule_graph
from geomol.errors import DatasetError

__all__ = ["MoleculeTrajectory", "MoleculeWindows"]


@dataclass
class MoleculeTrajectory:
    """The heavy atoms of one trajectory.

    Attributes:
        name: the molecule (or file) name. atomic_numbers: [n]. bonds: [B, 2] among the heavy atoms.
        hydrogens: [n] hydrogens bonded to each heavy atom.
        positions: [F, n, 3] Å. frame_interval_ps: time between frames where the file records it.
        smiles: the molecule's SMILES where the file records it ("" otherwise).
    """

    name: str
    atomic_numbers: np.ndarray
    bonds: np.ndarray
    hydrogens: np.ndarray
    positions: np.ndarray
    frame_interval_ps: float | None = None
    smiles: str = ""

    @classmethod
    def from_npz(cls, path: str | os.PathLike, name: str | None = None) -> "MoleculeTrajectory":
        """An MD17-layout npz (``R`` [F, m, 3] Å, ``z`` [m]; ``bonds``, ``smiles``, ``settings`` where written by
        ``geomol simulate``); bonds are perceived on the first frame when the file has none."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                R, z = np.asarray(data["R"], dtype=np.float64), np.asarray(data["z"], dtype=np.int64)
                bonds = np.asarray(data["bonds"], dtype=np.int64) if "bonds" in data.files else None
                smiles = str(data["smiles"]) if "smiles" in data.files else ""
                settings = json.loads(str(data["settings"])) if "settings" in data.files else {}
                stored_name = str(data["name"]) if "name" in data.files else ""
        except (OSError, ValueError, KeyError) as exc:
            raise DatasetError(f"not a molecule trajectory npz with 'R' and 'z' ({exc})", source=path) from exc
        if R.ndim != 3 or R.shape[1:] != (len(z), 3) or len(R) < 2 or not (z > 1).any():
            raise DatasetError(f"'R' has shape {R.shape} for {len(z)} atoms; need [frames ≥ 2, atoms, 3] with a "
                               "heavy atom", source=path)
        if bonds is None:
            bonds = perceive_bonds([int(a) for a in z], R[0])
        if not (z == 1).any():
            raise DatasetError("the run has no hydrogens: a molecule model needs them to know which heavy atoms carry "
                               "hydrogens", source=path)
        heavy, heavy_bonds, hydrogens = heavy_atom_graph(z, bonds)
        interval = (settings["timestep"] * settings["save_every"] * 1e-3
                    if {"timestep", "save_every"} <= set(settings) else None)
        label = name or (stored_name if stored_name and stored_name != "molecule" else path.stem.removeprefix("md17_"))
        return cls(label, z[heavy], heavy_bonds, hydrogens, R[:, heavy], interval, smiles)

    def __len__(self) -> int:
        return len(self.positions)


class MoleculeWindows(torch.utils.data.Dataset):
    """Windows of one or more :class:`MoleculeTrajectory` (module docstring).

    Args:
        trajectories: the runs. offsets: [P] target offsets (frames, increasing). velocity_span: s (frames).
        frame_range: (begin, end) fractions of each run whose frames the windows use.
        start_stride: a window starts every ``start_stride`` frames. skip_frames: frames left out at the start of
            each run (the heat-up from the starting conformer).
        dtype: of the tensors.
    """

    def __init__(self, trajectories: Sequence[MoleculeTrajectory], offsets: Sequence[int], velocity_span: int,
                 frame_range: tuple[float, float] = (0.0, 1.0), start_stride: int = 1, skip_frames: int = 0,
                 dtype=torch.float32):
        offsets = np.asarray(offsets, dtype=np.int64)
        if not len(offsets) or offsets[0] < 1 or np.any(np.diff(offsets) < 1) or velocity_span < 1:
            raise DatasetError(f"offsets {offsets.tolist()} must be positive and increasing, velocity_span ≥ 1")
        if not 0.0 <= frame_range[0] < frame_range[1] <= 1.0 or start_stride < 1:
            raise DatasetError(f"frame_range {frame_range} must satisfy 0 ≤ begin < end ≤ 1; start_stride ≥ 1")
        self.trajectories, self.offsets, self.velocity_span = list(trajectories), offsets, int(velocity_span)
        self.dtype = dtype
        self.graphs = [molecule_graph(t.atomic_numbers, t.bonds, t.hydrogens) for t in self.trajectories]
        index = []
        for k, traj in enumerate(self.trajectories):
            begin = max(skip_frames, int(frame_range[0] * len(traj)))
            end = int(frame_range[1] * len(traj))  # frames [begin, end) belong to this range
            first, last = begin + self.velocity_span, end - 1 - int(offsets[-1])
            index.extend((k, t) for t in range(first, last + 1, start_stride))
        self.index = np.asarray(index, dtype=np.int64).reshape(-1, 2)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int):
        k, t = (int(a) for a in self.index[i])
        traj, (edge_index, edge_attr, node_attr) = self.trajectories[k], self.graphs[k]
        x = traj.positions
        return trajectory_graph(x[t], x[t] - x[t - self.velocity_span], x[t + self.offsets].transpose(1, 0, 2),
                                edge_index, edge_attr, node_attr=node_attr, name=f"{traj.name}_{t}",
                                dtype=self.dtype)

    def displacement_scale(self, samples: int = 2000, seed: int = 0) -> np.ndarray:
        """[P] σ_p (Å) of the flow model's prior: :func:`~geomol.data.datasets.trajectories.trajectory.displacement_scale`
        over up to ``samples`` windows."""
        return displacement_scale(_Displacements(self), samples, seed)


class _Displacements:
    """(targets [P, n, 3], input frame [n, 3]) of each window, for :func:`displacement_scale`."""

    def __init__(self, windows: MoleculeWindows):
        self.windows = windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int):
        k, t = (int(a) for a in self.windows.index[i])
        x = self.windows.trajectories[k].positions
        return x[t + self.windows.offsets], x[t]
