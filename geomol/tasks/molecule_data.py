"""Small-molecule trajectories for models that read the molecule they are given (one molecule, or many).

:class:`MoleculeDataModule` cuts windows (:class:`~geomol.data.datasets.trajectories.molecule_windows.MoleculeWindows`) out of
the npz files ``geomol simulate molecule`` writes (or any MD17-layout npz): each run is split in time into training
and validation frames; the test split is every ``test_stride``-th window of independent runs (other seeds, or
molecules never trained on). Its protocol is the ``molecule`` kind's: the graph from elements and bonds, the velocity
a backward difference over the window's own frame spacing (so every rollout window starts in distribution), and,
for a model of one molecule, that molecule (atomic numbers, bonds and mean bond lengths) for atom matching.
"""
from __future__ import annotations

from functools import cached_property
from typing import Sequence

import numpy as np
from torch.utils.data import Dataset

from geomol.data.datasets.trajectories.molecule_windows import MoleculeTrajectory, MoleculeWindows
from geomol.data.datasets.trajectories.trajectory import even_offsets
from geomol.data.chemistry.molecule_graph import EDGE_FEATURES, NODE_FEATURES
from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.errors import ConfigError
from geomol.tasks.dynamics_data import TrajectoryDataModule

__all__ = ["MoleculeDataModule"]


class MoleculeDataModule(TrajectoryDataModule):
    """Windows of small-molecule runs (module docstring).

    Args:
        paths: training runs (``md17_<name>.npz``), one molecule or many.
        test_paths: independent runs for the test split (default, or None: none; the test split is then empty).
        delta: Δ, frames from the input frame to the window's last frame. num_timesteps: P (targets every Δ/P).
        train_range, valid_range: fractions of each training run whose frames train and validate.
        skip_frames: frames left out at the start of every run (heat-up from the starting conformer).
        start_stride: a training window starts every ``start_stride`` frames; valid_stride, test_stride: the same
            for validation and test (neighbouring windows of a 0.5 fs run are nearly the same).
    """

    def __init__(self, paths: Sequence[str], test_paths: Sequence[str] | None = (), delta: int = 3000, num_timesteps: int = 8,
                 train_range: tuple[float, float] = (0.0, 0.85), valid_range: tuple[float, float] = (0.85, 1.0),
                 skip_frames: int = 2000, start_stride: int = 1, valid_stride: int = 50, test_stride: int = 50,
                 batch_size: int = 32, **kwargs):
        super().__init__(num_timesteps=num_timesteps, batch_size=batch_size, **kwargs)
        if not paths:
            raise ConfigError("a molecule data module needs at least one training run")
        if delta % num_timesteps:
            raise ConfigError(f"delta={delta} must be a multiple of num_timesteps={num_timesteps} (evenly spaced "
                              "frames: the velocity span is their spacing)")
        if train_range[1] > valid_range[0] and valid_range[1] > train_range[0]:
            raise ConfigError(f"train_range {train_range} and valid_range {valid_range} overlap")
        self.paths, self.test_paths, self.delta = list(paths), list(test_paths or ()), delta
        self.ranges = {"train": tuple(train_range), "valid": tuple(valid_range)}
        self.strides = {"train": start_stride, "valid": valid_stride, "test": test_stride}
        self.skip_frames = skip_frames

    @property
    def offsets(self) -> np.ndarray:
        return even_offsets(self.delta, self.num_timesteps)

    @property
    def velocity_span(self) -> int:
        return self.delta // self.num_timesteps

    @cached_property
    def trajectories(self) -> list[MoleculeTrajectory]:
        return [MoleculeTrajectory.from_npz(p) for p in self.paths]

    def make_split(self, stage: str) -> Dataset:
        if stage == "test":
            runs = [MoleculeTrajectory.from_npz(p) for p in self.test_paths]
            return MoleculeWindows(runs, self.offsets, self.velocity_span, start_stride=self.strides["test"],
                                   skip_frames=self.skip_frames)
        return MoleculeWindows(self.trajectories, self.offsets, self.velocity_span, frame_range=self.ranges[stage],
                               start_stride=self.strides[stage], skip_frames=self.skip_frames)

    def prior_scale(self) -> list[float]:
        """[P] σ_p of the flow model's prior: the training windows' displacement spread (Å)."""
        return [float(s) for s in self._train_split().displacement_scale()]

    @property
    def protocol(self) -> TrajectoryProtocol:
        runs = self.trajectories
        intervals = {r.frame_interval_ps for r in runs}
        if len(intervals) > 1:
            raise ConfigError(f"the runs have different frame intervals ({sorted(map(str, intervals))} ps)")
        one = {"molecule": runs[0].name} if len(runs) == 1 else {"molecule": ", ".join(r.name for r in runs)}
        if len({r.smiles or r.name for r in runs}) == 1:  # one molecule (several runs of it): match users' atoms to it
            run = runs[0]
            lengths = np.linalg.norm(run.positions[:, run.bonds[:, 0]] - run.positions[:, run.bonds[:, 1]], axis=-1)
            one.update(atomic_numbers=tuple(int(z) for z in run.atomic_numbers),
                       bonds=tuple((int(i), int(j)) for i, j in run.bonds),
                       hydrogens=tuple(int(h) for h in run.hydrogens),
                       bond_lengths=tuple(float(d) for d in lengths[self.skip_frames:].mean(0)))
        span = self.velocity_span
        return TrajectoryProtocol(
            "molecule", tuple(int(o) for o in self.offsets), frame_time=1.0 / span, frame_interval=intervals.pop(),
            time_unit="ps", length_unit="Å", velocity=f"x[t] − x[t − {span}] (Å per {span} frames)",
            velocity_span=span, velocity_direction="backward", node_features=("|v|",) + NODE_FEATURES,
            edge_features=EDGE_FEATURES + ("d² in the state",), **one)
