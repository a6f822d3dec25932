"""MD17 molecular dynamics from an sGDML ``.npz`` (keys ``R`` [F, n, 3] in Å, ``z`` [n]), ``specs/EGNO.md`` §3.3.

The user supplies the file (e.g. ``md17_aspirin.npz``). Reference protocol:

* x_t = R_t and v_t = R_{t+1} − R_t (Å per frame) for t < F − 1; optionally (not the reference) the backward
  difference over s frames, v_t = (R_t − R_{t−s}) / s, which a rollout knows exactly at the end of each
  predicted window when s is the spacing of the last two targets (``velocity_span``, ``velocity_direction``);
* split: frame indices drawn without replacement from [margin, F − 1 − margin) with NumPy's
  legacy ``RandomState(100)``: 10 % train, then 5 % valid and 5 % test from the rest (the
  reference algorithm, so the indices equal the shipped ``<mol>_split.pkl``); or a split file;
  each split cut to its first ``max_samples`` (train 500, valid/test 2000);
* hydrogens removed; graph from frame 0: bonds ‖x_i − x_j‖ < 1.6 Å (hop 1) and pairs sharing a
  bonded neighbour (hop 2), i outer / j inner; edge_attr = [z_i, z_j, hop, stick], where stick
  marks the molecule's hard-coded "stick" pairs;
* targets x[st + ⌊Δp/P⌋], p = 1..P (Δ = 3000, P = 8).

``node_attr`` = z / max z. The reference divides by the maximum over the batch, which for one
molecule is the same constant, so both conventions agree here.
"""
from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import numpy as np
import torch

from geomol.errors import DatasetError
from geomol.data.io.array_pickle import load_array_pickle
from geomol.data.io.npz import open_npz
from geomol.data.vocab import ELEMENTS, VOCAB, atom_index, element_block_symbol
from geomol.data.datasets.trajectories.trajectory import even_offsets, trajectory_graph
from geomol.data.chemistry.covalent_graph import perceive_bonds
from geomol.data.chemistry.molecule_graph import heavy_atom_graph
from geomol.data.dynamics.graphs import bond_and_two_hop_edges, md17_edge_features

__all__ = ["MD17Dataset", "STICK_PAIRS", "md17_split"]

# Heavy-atom pairs the reference marks as "sticks" per molecule (indices after removing H).
STICK_PAIRS: dict[str, tuple[tuple[int, int], ...]] = {
    "benzene_old": ((0, 1), (2, 3), (4, 5)),
    "aspirin": ((0, 2), (1, 3), (5, 6), (7, 10), (11, 12)),
    "ethanol": ((0, 1),),
    "malonaldehyde": ((1, 2),),
    "naphthalene": ((0, 1), (2, 3), (4, 9), (5, 6), (7, 8)),
    "salicylic": ((0, 9), (1, 2), (4, 5), (6, 7)),
    "toluene": ((2, 3), (5, 6), (0, 1)),
    "uracil": ((0, 1), (3, 4)),
}
_SPLITS = ("train", "valid", "test")
_DEFAULT_MAX_SAMPLES = {"train": 500, "valid": 2000, "test": 2000}


def md17_split(num_frames: int, seed: int = 100, fractions=(0.1, 0.05, 0.05), margin: int = 10000):
    """(train, valid, test) start-frame arrays, drawn as the reference does (legacy NumPy stream).

    Args:
        num_frames: number of usable frames (len(R) − 1).
        margin: frames excluded at each end before drawing.
    """
    candidates = num_frames - 2 * margin
    if candidates <= 0:
        raise DatasetError(f"{num_frames} frames leave nothing between the {margin}-frame margins")
    rng = np.random.RandomState(seed)
    taken = np.zeros(candidates, dtype=bool)
    out = []
    for fraction in fractions:
        pool = np.arange(candidates) if not out else np.flatnonzero(~taken)
        chosen = rng.choice(pool, size=int(fraction * candidates), replace=False)
        taken[chosen] = True
        out.append(chosen + margin)
    return tuple(out)


def _load_split_file(path: Path):
    if path.suffix != ".npz":  # the reference's <mol>_split.pkl: a tuple of 3 int arrays
        split = load_array_pickle(path)
        if not isinstance(split, (tuple, list)) or len(split) != 3:
            raise DatasetError("expected a (train, valid, test) tuple of start-frame arrays", source=path)
        try:
            return tuple(np.asarray(s, dtype=np.int64).reshape(-1) for s in split)
        except (TypeError, ValueError) as exc:
            raise DatasetError(f"split entries are not integer arrays ({exc})", source=path) from exc
    try:
        with np.load(path) as data:
            return tuple(np.asarray(data[s], dtype=np.int64) for s in _SPLITS)
    except (OSError, ValueError, KeyError) as exc:
        raise DatasetError(f"unreadable split file ({exc})", source=path) from exc


def _official_split_file(path: Path, molecule: str) -> Path | None:
    """The reference keeps ``<molecule>_split.pkl`` next to ``md17_<molecule>.npz``; use it when it is there."""
    candidate = path.with_name(f"{molecule}_split.pkl")
    return candidate if candidate.is_file() else None


def _frame_interval_ps(path: Path) -> float | None:
    """Time between frames recorded by ``geomol simulate`` (its ``settings``); None for other files."""
    try:
        with np.load(path) as data:
            settings = json.loads(str(data["settings"])) if "settings" in data.files else None
        return settings["timestep"] * settings["save_every"] * 1e-3 if settings else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _molecule_name(path: Path, molecule: str | None) -> str:
    if molecule:
        return molecule
    match = re.match(r"md17_(.+)\.npz$", path.name)
    return match.group(1) if match else path.stem


class MD17Dataset(torch.utils.data.Dataset):
    """MD17 heavy-atom trajectory samples as BlockGraphs (one block per atom).

    Args:
        path: sGDML npz with ``R`` and ``z``.
        split: "train" | "valid" | "test".
        molecule: name for the stick table (default: from ``md17_<mol>.npz``).
        delta: Δ frames to the last target. num_timesteps: P.
        max_samples: cut of each split (reference 500 / 2000 / 2000).
        split_file: reference ``<mol>_split.pkl`` or an npz with train/valid/test arrays (default: the
            reference's ``<molecule>_split.pkl`` next to ``path`` when it exists).
        split_seed, fractions, margin: split generation when there is no split file.
        bond_cutoff: Å, bonds in frame 0.
        velocity_span, velocity_direction: v_t = (R_{t+s} − R_t) / s ("forward", the reference with s = 1) or
            (R_t − R_{t−s}) / s ("backward"), Å per frame either way.

    Attributes:
        sticks: the stick pairs used. frame_interval_ps: time between frames where the file records it
            (files of ``geomol simulate``), else None. hydrogens: [n] hydrogens bonded to each heavy atom
            (perceived in the first frame).
    """

    def __init__(self, path: str | os.PathLike, split: str = "train", *, molecule: str | None = None,
                 delta: int = 3000, num_timesteps: int = 8, max_samples: int | None = None,
                 split_file: str | os.PathLike | None = None, split_seed: int = 100,
                 fractions=(0.1, 0.05, 0.05), margin: int = 10000, bond_cutoff: float = 1.6,
                 velocity_span: int = 1, velocity_direction: str = "forward"):
        if split not in _SPLITS:
            raise DatasetError(f"unknown split {split!r} (train | valid | test)")
        path = Path(path)
        R, z = self._read(path)
        self.frame_interval_ps = _frame_interval_ps(path)
        self.split, self.molecule = split, _molecule_name(path, molecule)
        heavy = z > 1
        if velocity_span < 1 or velocity_direction not in ("forward", "backward"):
            raise DatasetError(f"velocity_span {velocity_span} must be ≥ 1 and velocity_direction forward or backward")
        self.positions = R[:-1][:, heavy]  # x_t
        s = velocity_span
        self.velocities = np.full_like(self.positions, np.nan)  # v_t; NaN where frame t ∓ s does not exist
        if velocity_direction == "forward":
            self.velocities[:len(R) - s] = ((R[s:] - R[:-s]) / s)[:, heavy][:len(self.positions)]
        else:
            self.velocities[s:] = ((R[s:-1] - R[:-1 - s]) / s)[:, heavy]
        self.velocity_span, self.velocity_direction = s, velocity_direction
        self.z = z[heavy]
        split_file = Path(split_file) if split_file else _official_split_file(path, self.molecule)
        splits = _load_split_file(split_file) if split_file else md17_split(len(R) - 1, split_seed, fractions, margin)
        self.offsets = even_offsets(delta, num_timesteps)
        self.starts = splits[_SPLITS.index(split)][:max_samples or _DEFAULT_MAX_SAMPLES[split]]
        if len(self.starts) and (self.starts.min() < 0 or self.starts.max() + delta >= len(self.positions)):
            raise DatasetError(f"split starts + Δ={delta} run past the {len(self.positions)} frames", source=path)
        if len(self.starts) and not np.isfinite(self.velocities[self.starts]).all():
            raise DatasetError(f"a split start is within {velocity_span} frames of the trajectory's end: no "
                               f"{velocity_direction} velocity there", source=path)
        self.edge_index, self.edge_attr = self._graph(bond_cutoff)
        self.hydrogens = heavy_atom_graph(z, perceive_bonds([int(a) for a in z], R[0]))[2]  # [n] H on each heavy atom
        self.atom_types = np.array([atom_index(ELEMENTS[a - 1]) for a in self.z])
        self.block_types = np.array([VOCAB.index(element_block_symbol(ELEMENTS[a - 1])) for a in self.z])

    @staticmethod
    def _read(path: Path):
        try:
            with open_npz(path) as data:
                R, z = np.asarray(data["R"], dtype=np.float64), np.asarray(data["z"], dtype=np.int64)
        except (OSError, ValueError, KeyError) as exc:
            raise DatasetError(f"not an sGDML npz with 'R' and 'z' ({exc})", source=path) from exc
        if R.ndim != 3 or R.shape[1:] != (len(z), 3) or len(R) < 2:
            raise DatasetError(f"'R' has shape {R.shape}, expected [frames ≥ 2, {len(z)}, 3]", source=path)
        if (z < 1).any() or (z > len(ELEMENTS)).any() or not (z > 1).any():
            raise DatasetError("'z' must hold atomic numbers with at least one heavy atom", source=path)
        return R, z

    def _graph(self, bond_cutoff: float):
        x0 = self.positions[0]
        bonded = np.linalg.norm(x0[:, None] - x0[None], axis=-1) < bond_cutoff
        edge_index, hop = bond_and_two_hop_edges(bonded)
        sticks = STICK_PAIRS.get(self.molecule)
        self.sticks = tuple(sticks or ())
        if sticks is None:
            warnings.warn(f"MD17 molecule {self.molecule!r} has no stick table; stick feature set to 0 "
                          f"on all {edge_index.shape[1]} edges")
        return edge_index, md17_edge_features(self.z, edge_index, hop, self.sticks)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int):
        st = int(self.starts[i])
        return trajectory_graph(self.positions[st], self.velocities[st],
                                self.positions[st + self.offsets].transpose(1, 0, 2), self.edge_index,
                                self.edge_attr, node_attr=(self.z / self.z.max())[:, None],
                                atom_types=self.atom_types, block_types=self.block_types,
                                name=f"md17_{self.molecule}_{self.split}_{st}")
