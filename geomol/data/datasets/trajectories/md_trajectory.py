"""Molecular-dynamics trajectories read through MDAnalysis (any topology + trajectory it reads).

Generalises the reference AdK protocol (``specs/EGNO.md`` §3.4) to PSF/DCD, GRO/XTC, PDB, ...:

* an atom selection (default ``"backbone"``) read once into memory, positions in Å:
  :class:`MDTrajectory` ([F, N, 3] float32, F frames);
* velocities v_i = x_{i+1} − x_i (Å per frame), so F − 1 frames are usable; or (not the reference) the backward
  difference over s frames, v_i = (x_i − x_{i−s}) / s, which a rollout knows exactly at the end of each predicted
  window when s is the spacing of its last two targets (windows then start at frame s or later);
* start frame i, targets i + ⌊j(Δ+1)/P⌋ − 1 for j = 1..P (Δ = 15, P = 4: i+3, i+7, i+11, i+15);
* chronological split of the F − 1 − Δ starts at int(0.6·(F−1−Δ)) and int(0.8·(F−1−Δ)).
  The reference lets the targets of the last training starts reach into the validation range
  (and validation into test); ``leak_free=True`` drops the last Δ starts of train and valid so
  that no frame of one range is a target of another;
* edges: radius graph of the input frame, ‖x_i − x_j‖ < cutoff (8 Å, strict as MDAnalysis'
  ``contact_matrix``), edge_attr = distance d (the model adds d²);
* ``node_attr``: partial charge / max charge of the selection (the reference's batch maximum is
  this same constant, since every frame has the same topology); omitted when the topology has no
  charges (F = 1 then).

Blocks are residues (consecutive atoms of one residue), so a protein's BlockGraph has the same
block structure as elsewhere in geomol; with ``particles="residue"`` the residues themselves
(their centroids) are the particles. For rollout tools, :attr:`MDTrajectory.atom_indices`
gives the topology index of each node and :meth:`MDTrajectoryDataset.frames` the trajectory
frame numbers behind a sample.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import torch

from geomol.errors import ConfigError, DatasetError, TrajectoryError
from geomol.data.vocab import VOCAB, BLOCK_UNK, atom_index, position_code, position_index, residue_block_symbol
from geomol.data.datasets.trajectories.trajectory import velocity_at, displacement_scale, trajectory_graph
from geomol.data.dynamics.graphs import radius_edges
from geomol.data.dynamics.systems import CoarseNodes
from geomol.data.io.trajectory import atom_elements, open_selection, trajectory_files

__all__ = ["MDTrajectory", "MDTrajectoryDataset", "md_target_offsets", "md_split_ranges", "open_selection"]



def md_target_offsets(delta: int, num_timesteps: int) -> np.ndarray:
    """[P] offsets ⌊j(Δ+1)/P⌋ − 1, j = 1..P, of the target frames from the input frame (last = Δ)."""
    return np.array([j * (delta + 1) // num_timesteps - 1 for j in range(1, num_timesteps + 1)], dtype=np.int64)


def md_split_ranges(num_frames: int, delta: int, ratios=(0.6, 0.2, 0.2), leak_free: bool = False):
    """Start-frame ranges {split: (begin, end)} of the chronological split.

    Args:
        num_frames: frames with a velocity (trajectory length − 1).
        delta: Δ, offset of the last target.
        leak_free: end train and valid Δ frames early so their targets stay inside their range.
    """
    total = max(0, num_frames - delta)
    cut0, cut1 = int(ratios[0] * total), int((ratios[0] + ratios[1]) * total)
    gap = delta if leak_free else 0
    return {"train": (0, max(0, min(total, cut0) - gap)),
            "valid": (cut0, max(cut0, min(total, cut1) - gap)),
            "test": (cut1, max(cut1, total))}


class MDTrajectory:
    """Positions of an atom selection over a whole trajectory, read once.

    Args:
        topology: any topology MDAnalysis reads (PSF, GRO, PDB, TPR, ...).
        trajectory: trajectory file(s) (DCD, XTC, TRR, ...); ``None`` uses the topology's frames.
        selection: MDAnalysis selection string.
        start, stop, step: slice of the trajectory frames to read.

    Attributes:
        positions: [F, N, 3] float32 (Å). frame_numbers: [F] trajectory frame of each.
        time_ps: [F] simulation time. atom_indices: [N] topology index of each selected atom.
        charges: [N] partial charges or ``None``. names, resnames, elements: per atom.
        residue_block: [N] block index (runs of consecutive atoms of one residue).
    """

    def __init__(self, topology: str | os.PathLike, trajectory: str | os.PathLike | Sequence | None = None, *,
                 selection: str = "backbone", start: int | None = None, stop: int | None = None,
                 step: int | None = None):
        universe, atoms = open_selection(topology, trajectory, selection)
        self.selection, self.source = selection, tuple(trajectory_files(topology, trajectory))
        frames, times, numbers = [], [], []
        try:
            for ts in universe.trajectory[start:stop:step]:
                frames.append(atoms.positions.astype(np.float32, copy=True))
                times.append(ts.time), numbers.append(ts.frame)
        except Exception as exc:
            raise TrajectoryError(f"reading frame {len(frames)} failed: {exc}", source=self.source[-1]) from exc
        self.positions = np.stack(frames)
        self.time_ps, self.frame_numbers = np.array(times), np.array(numbers)
        self.atom_indices = atoms.indices.copy()
        self.names, self.resnames = [str(n) for n in atoms.names], [str(r) for r in atoms.resnames]
        self.elements = atom_elements(atoms)
        self.charges = np.asarray(atoms.charges, dtype=np.float64) if hasattr(atoms, "charges") else None
        resindex = atoms.resindices
        self.residue_block = np.concatenate([[0], np.cumsum(resindex[1:] != resindex[:-1])]).astype(np.int64)

    @property
    def num_atoms(self) -> int:
        return self.positions.shape[1]

    def __len__(self) -> int:
        return len(self.positions)


class MDTrajectoryDataset(torch.utils.data.Dataset):
    """Trajectory samples (input frame → P target frames) of one split of an :class:`MDTrajectory`.

    Args:
        source: an :class:`MDTrajectory` (share it between splits) or a topology path.
        trajectory, selection: used when ``source`` is a path.
        split: "train" | "valid" | "test".
        delta: Δ. num_timesteps: P. cutoff: radius-graph cutoff in Å.
        ratios: fractions of the starts for train / valid / test.
        leak_free: keep every target frame inside its own split range (see module docstring).
        charge_feature: "auto" (charges if the topology has them), True (required) or False.
        start_stride: a window starts every ``start_stride`` frames of the split's range (1: every frame; more
            for trajectories saved every integration step, whose neighbouring windows are nearly the same).
        particles: "atom" (each selected atom is a node, blocks are residues) or "residue" (each
            residue's centroid is a node and its own block; charge = the residue's net charge).
        coarse_atom, coarse_cutoff: atoms of this name (e.g. ``CA``) closer than ``coarse_cutoff`` Å are joined by
            coarse edges as well (:func:`~geomol.data.dynamics.graphs.radius_edges`; atom particles only).
    """

    def __init__(self, source: MDTrajectory | str | os.PathLike, trajectory=None, *, split: str = "train",
                 selection: str = "backbone", delta: int = 15, num_timesteps: int = 4, cutoff: float = 8.0,
                 ratios=(0.6, 0.2, 0.2), leak_free: bool = False, charge_feature: bool | str = "auto",
                 particles: str = "atom", start_stride: int = 1, velocity_span: int = 1,
                 velocity_direction: str = "forward", coarse_atom: str | None = None,
                 coarse_cutoff: float | None = None):
        if split not in ("train", "valid", "test"):
            raise DatasetError(f"unknown split {split!r} (train | valid | test)")
        if delta < num_timesteps - 1 or num_timesteps < 1 or cutoff <= 0:
            raise ConfigError(f"need P ≥ 1, Δ ≥ P − 1 and cutoff > 0 (got P={num_timesteps}, Δ={delta}, "
                              f"cutoff={cutoff})")
        if start_stride < 1:
            raise ConfigError(f"start_stride must be ≥ 1, got {start_stride}")
        if (velocity_direction, velocity_span) != ("forward", 1) and (velocity_direction != "backward" or
                                                                      velocity_span < 1):
            raise ConfigError(f"the velocity is the forward one-frame difference or a backward difference over ≥ 1 "
                              f"frames, got {velocity_direction} over {velocity_span}")
        if particles not in ("atom", "residue"):
            raise ConfigError(f"particles must be 'atom' or 'residue', got {particles!r}")
        self.traj = source if isinstance(source, MDTrajectory) else MDTrajectory(source, trajectory,
                                                                                 selection=selection)
        if len(self.traj) < delta + 2:
            raise TrajectoryError(f"{len(self.traj)} frames are too few for Δ={delta}", source=self.traj.source[-1])
        self.split, self.delta, self.cutoff = split, delta, cutoff
        self.offsets = md_target_offsets(delta, num_timesteps)
        self.begin, self.end = md_split_ranges(len(self.traj) - 1, delta, ratios, leak_free)[split]
        self.velocity_span, self.velocity_direction = velocity_span, velocity_direction
        if velocity_direction == "backward":  # the state reads frame start − s
            self.begin = min(max(self.begin, velocity_span), max(self.end, self.begin))
        self.start_stride = start_stride
        self.particles = particles
        self._set_particles(particles, charge_feature)
        self.coarse_atom, self.coarse_cutoff, self.coarse = self._coarse(coarse_atom, coarse_cutoff)

    def _set_particles(self, particles: str, charge_feature) -> None:
        """Per-particle positions [F, n, 3], types, blocks and scaled charges of atoms or residues."""
        traj = self.traj
        first_atom = np.flatnonzero(np.diff(traj.residue_block, prepend=-1))
        self.block_types = np.array([VOCAB.index(s) if (s := residue_block_symbol(traj.resnames[a])) else
                                     BLOCK_UNK for a in first_atom])
        charges = traj.charges
        if particles == "residue":
            size = np.diff(np.append(first_atom, traj.num_atoms))
            centroids = np.add.reduceat(traj.positions, first_atom, axis=1) / size[None, :, None]
            self.positions = centroids.astype(np.float32)
            charges = None if charges is None else np.add.reduceat(charges, first_atom)
            self.atom_types = self.atom_pos = self.block_id = None
        else:
            self.positions = traj.positions
            self.atom_types = np.array([atom_index(e) for e in traj.elements])
            self.atom_pos = np.array([position_index(position_code(n, e)) for n, e in zip(traj.names, traj.elements)])
            self.block_id = traj.residue_block
        self.node_attr = self._charge_feature(charge_feature, charges)

    def _coarse(self, atom: str | None, cutoff: float | None):
        """(atom name, cutoff, :class:`~geomol.data.dynamics.systems.CoarseNodes`) of the coarse edges, or Nones."""
        if (atom is None) != (cutoff is None):
            raise ConfigError(f"coarse edges need both an atom name and a cutoff, got {atom!r} and {cutoff!r}")
        if atom is None:
            return None, None, None
        if cutoff <= 0 or self.particles != "atom":
            raise ConfigError(f"coarse edges need a positive cutoff and atom particles (got {cutoff} Å, "
                              f"{self.particles} particles)")
        return atom, float(cutoff), CoarseNodes.named(self.traj.names, atom, source=self.traj.source[0])

    def _charge_feature(self, charge_feature, charges):
        """[n, 1] charges scaled by the largest (the maximum, or the largest magnitude if none is > 0).

        The divisor is kept as :attr:`charge_scale` (``None`` without a charge feature), so that a
        rollout on another topology scales its charges exactly as in training.
        """
        if charge_feature is True and charges is None:
            raise ConfigError("charge_feature=True but the topology has no partial charges",
                              source=self.traj.source[0])
        self.charge_scale = None
        if charge_feature is False or charges is None:
            return None
        scale = charges.max() if charges.max() > 0 else np.abs(charges).max()
        self.charge_scale = float(scale) if scale > 0 else 1.0
        return charges[:, None] / self.charge_scale

    def __len__(self) -> int:
        return max(0, -(-(self.end - self.begin) // self.start_stride))

    def frames(self, i: int) -> tuple[int, np.ndarray]:
        """Indices into :attr:`MDTrajectory.positions` of sample i: input frame and [P] target frames."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        start = self.begin + i * self.start_stride
        return start, start + self.offsets

    def displacement_scale(self, samples: int = 2000, seed: int = 0) -> np.ndarray:
        """[P] σ_p (Å) of a generative model's prior over up to ``samples`` windows (:func:`displacement_scale`)."""
        windows = [(self.positions[t], self.positions[s]) for s, t in (self.frames(i) for i in range(len(self)))]
        return displacement_scale(windows, samples, seed)

    def __getitem__(self, i: int):
        start, targets = self.frames(i)
        pos = self.positions
        x = torch.from_numpy(pos[start])
        edge_index, dist = radius_edges(x, self.cutoff, None if self.coarse is None else self.coarse.index,
                                        self.coarse_cutoff)
        velocity = velocity_at(pos, start, self.velocity_span, self.velocity_direction)
        return trajectory_graph(pos[start], velocity, pos[targets].transpose(1, 0, 2),
                                edge_index, dist, node_attr=self.node_attr, atom_types=self.atom_types,
                                atom_pos=self.atom_pos, block_id=self.block_id, block_types=self.block_types,
                                name=f"md_{self.split}_{start}")
