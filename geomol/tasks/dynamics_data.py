"""LightningDataModules of the trajectory datasets (EGNO / EGNN): N-body, Mocap, MD17, MD trajectories.

Each wraps the dataset classes of :mod:`geomol.data.datasets` with the reference protocol's
defaults (``specs/EGNO.md`` §3–4) and fixed-size batches; training batches drop the incomplete
last batch, as the reference trainers do.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np
from torch.utils.data import Dataset

from geomol.data.batching.sampler import FixedBatchSampler
from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.errors import ConfigError
from geomol.tasks.data_base import STAGES, GraphDataModule

__all__ = ["TrajectoryDataModule", "NBodyDataModule", "MocapDataModule", "MD17DataModule", "MDTrajectoryDataModule"]


def velocity_text(span: int, direction: str) -> str:
    """The velocity definition in words, for a protocol (Å per frame)."""
    if direction == "forward":
        return "x[t+1] − x[t] (Å per frame)" if span == 1 else f"(x[t+{span}] − x[t]) / {span} (Å per frame)"
    return f"(x[t] − x[t−{span}]) / {span} (Å per frame)"


class TrajectoryDataModule(GraphDataModule):
    """Fixed-size batches of trajectory samples.

    Args:
        batch_size: samples per batch (per device).
        num_timesteps: P, frames predicted per sample (must equal the model's).
        num_workers, seed: see :class:`~geomol.tasks.data_base.GraphDataModule`.
    """

    def __init__(self, batch_size: int = 100, num_timesteps: int = 5, num_workers: int = 0, seed: int = 1):
        super().__init__(num_workers=num_workers, seed=seed)
        self.batch_size, self.num_timesteps = batch_size, num_timesteps

    def make_split(self, stage: str) -> Dataset:
        raise NotImplementedError

    @property
    def protocol(self) -> TrajectoryProtocol | None:
        """How a state becomes this data's model input (stored in checkpoints by
        :class:`~geomol.tasks.DynamicsModule`, used by rollouts); None when rollouts are not supported."""
        return None

    @property
    def graph_recipe(self) -> TrajectoryProtocol | None:
        return self.protocol

    def _train_split(self) -> Dataset:
        self.setup()
        return self.splits["train"]

    def build_splits(self) -> dict[str, Dataset]:
        return {stage: self.make_split(stage) for stage in STAGES}

    def batch_sampler(self, dataset: Dataset, train: bool, num_replicas: int, rank: int) -> FixedBatchSampler:
        return FixedBatchSampler(len(dataset), self.batch_size, drop_incomplete=train and len(dataset) >= self.batch_size,
                                 shuffle=train, seed=self.seed, num_replicas=num_replicas, rank=rank, pad=train)


class NBodyDataModule(TrajectoryDataModule):
    """Charged N-body particles, simulated once and cached (reference ``nbody_small`` protocol).

    Args:
        cache_dir: folder for the simulated ``.npz`` (``None``: simulate in memory each run).
        num_train, num_valid, num_test: simulations generated per split (reference 10000/2000/2000).
        max_train: simulations used for training (reference 3000).
        seed_data: simulation seed (reference 43).
        frame_0, frame_T: input frame and last target frame (reference 30 → 40).
        official_dir: use the official generator's ``loc_/vel_/charges_*.npy`` files in this folder
            instead of simulating (the generation arguments are then ignored).
    """

    def __init__(self, cache_dir: str | None = None, num_train: int = 10000, num_valid: int = 2000,
                 num_test: int = 2000, max_train: int = 3000, seed_data: int = 43, frame_0: int = 30,
                 frame_T: int = 40, official_dir: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.cache_dir, self.max_train, self.frame = cache_dir, max_train, (frame_0, frame_T)
        self.official_dir = official_dir
        self.generation = dict(seed=seed_data, num_train=num_train, num_valid=num_valid, num_test=num_test)
        self._data: Any = None

    def prepare_data(self) -> None:
        if self.cache_dir is not None and self.official_dir is None:
            from geomol.data.datasets.trajectories.nbody import load_or_generate

            load_or_generate(self.cache_dir, **self.generation)

    def make_split(self, stage: str) -> Dataset:
        from geomol.data.datasets.trajectories.nbody import NBodyDataset, load_official_files, load_or_generate

        if self._data is None:
            self._data = (load_official_files(self.official_dir) if self.official_dir is not None
                          else load_or_generate(self.cache_dir, **self.generation))
        return NBodyDataset(stage, num_timesteps=self.num_timesteps, frame_0=self.frame[0], frame_T=self.frame[1],
                            max_samples=self.max_train if stage == "train" else None, data=self._data)

    @property
    def protocol(self) -> TrajectoryProtocol:
        from geomol.data.datasets.trajectories.nbody import ChargedParticles

        dataset, system = self._train_split(), ChargedParticles()
        frame = system.sample_every * system.dt  # simulation time between saved frames
        return TrajectoryProtocol(
            "nbody", tuple((dataset.target_frames - dataset.frame_0).tolist()), num_nodes=int(dataset.loc.shape[2]),
            frame_time=frame, frame_interval=frame, time_unit="simulation time", length_unit="simulation length",
            velocity="simulator velocity (length per simulation time)", node_features=("|v|",),
            edge_features=("q_i q_j", "d²"))


class MocapDataModule(TrajectoryDataModule):
    """CMU motion capture "Run" with the benchmark's fixed split (reference: batch 12, Δ 30, P 5).

    Args:
        path: the ``cmu_subject09_run.npz`` file (default: under ``$GEOMOL_SHARED_DATA``, :mod:`geomol.data.paths`).
        delta: Δ frames; last: targets are the last P frames up to Δ (reference) or evenly spaced.
        height_feature: the reference's joint-height node feature (not rotation invariant).
    """

    def __init__(self, path: str | None = None, delta: int = 30, last: bool = True, height_feature: bool = True,
                 batch_size: int = 12, **kwargs):
        super().__init__(batch_size=batch_size, **kwargs)
        self.path, self.delta, self.last, self.height_feature = path, delta, last, height_feature

    def make_split(self, stage: str) -> Dataset:
        from geomol.data.datasets.trajectories.mocap import MocapDataset

        return MocapDataset(stage, self.path, num_timesteps=self.num_timesteps, delta=self.delta, last=self.last,
                            height_feature=self.height_feature)

    @property
    def protocol(self) -> TrajectoryProtocol:
        dataset = self._train_split()
        hop, (row, col) = dataset.edge_attr[:, 0], dataset.edge_index
        bonds = sorted({(int(min(i, j)), int(max(i, j))) for i, j, k in zip(row, col, hop) if k == 1})
        return TrajectoryProtocol(
            "mocap", tuple(dataset.offsets.tolist()), num_nodes=int(dataset.positions[0].shape[1]), bonds=tuple(bonds),
            height_scale=dataset.height_scale if self.height_feature else None, frame_time=1.0, frame_interval=None,
            time_unit="frame", length_unit="ASF length unit", velocity="x[t+1] − x[t] (length per frame)",
            node_features=("|v|",) + (("(y/10)/height_scale",) if self.height_feature else ()),
            edge_features=("hop (1 bond, 2 two-hop)", "d²"))


class MD17DataModule(TrajectoryDataModule):
    """MD17 from an sGDML ``.npz`` the user supplies (reference: Δ 3000, P 8, batch 100).

    Args:
        path: ``md17_<molecule>.npz`` with ``R`` and ``z``.
        split_file: the reference ``<mol>_split.pkl``-style split (optional; else generated).
        max_train: training samples (reference 500).
        margin: frames excluded at both ends when generating a split (reference 10000).
        velocity_span, velocity_direction: the input velocity (see :class:`~geomol.data.datasets.trajectories.md17.MD17Dataset`):
            the reference's forward one-frame difference, or ``backward`` over ``velocity_span`` frames (with the
            spacing of the last two targets, Δ/P, every rollout window then starts in distribution).
    """

    def __init__(self, path: str, split_file: str | None = None, delta: int = 3000, max_train: int = 500,
                 margin: int = 10000, num_timesteps: int = 8, velocity_span: int = 1,
                 velocity_direction: Literal["forward", "backward"] = "forward", **kwargs):
        super().__init__(num_timesteps=num_timesteps, **kwargs)
        self.path, self.split_file, self.delta, self.max_train = path, split_file, delta, max_train
        self.margin, self.velocity = margin, dict(velocity_span=velocity_span, velocity_direction=velocity_direction)

    def make_split(self, stage: str) -> Dataset:
        from geomol.data.datasets.trajectories.md17 import MD17Dataset

        return MD17Dataset(self.path, stage, delta=self.delta, num_timesteps=self.num_timesteps,
                           split_file=self.split_file, margin=self.margin,
                           max_samples=self.max_train if stage == "train" else None, **self.velocity)

    @property
    def protocol(self) -> TrajectoryProtocol:
        dataset = self._train_split()
        hop, (row, col) = dataset.edge_attr[:, 2], dataset.edge_index
        bonds = sorted({(int(min(i, j)), int(max(i, j))) for i, j, k in zip(row, col, hop) if k == 1})
        sticks, span = dataset.sticks, dataset.velocity_span
        x = dataset.positions[dataset.starts]
        lengths = np.linalg.norm(x[:, [b[0] for b in bonds]] - x[:, [b[1] for b in bonds]], axis=-1).mean(0)
        velocity = velocity_text(span, dataset.velocity_direction)
        return TrajectoryProtocol(
            "md17", tuple(int(o) for o in dataset.offsets), num_nodes=len(dataset.z), bonds=tuple(bonds),
            atomic_numbers=tuple(int(z) for z in dataset.z), sticks=sticks, frame_time=1.0,
            frame_interval=dataset.frame_interval_ps, time_unit="ps", length_unit="Å", velocity=velocity,
            velocity_span=span, velocity_direction=dataset.velocity_direction,
            bond_lengths=tuple(float(d) for d in lengths), molecule=dataset.molecule,
            hydrogens=tuple(int(h) for h in dataset.hydrogens), node_features=("|v|", "z / max z"),
            edge_features=("z_i", "z_j", "hop (1 bond, 2 two-hop)", "stick", "d²"))


class MDTrajectoryDataModule(TrajectoryDataModule):
    """Any MDAnalysis-readable trajectory, split in time (reference AdK: backbone, 8 Å, Δ 15, P 4).

    Args:
        topology, trajectory: files MDAnalysis reads (PSF + DCD, GRO + XTC, PDB, ...).
        selection: atom selection (default ``backbone``). cutoff: radius graph in Å.
        coarse_atom, coarse_cutoff: atoms of this name (e.g. ``CA``) closer than ``coarse_cutoff`` Å are joined by
            coarse edges as well (a second edge feature flags them); None: the radius graph alone.
        delta: Δ frames to the last target. ratios: train / valid / test fractions of time.
        leak_free: keep every target inside its own split's time range.
        start_stride: a window starts every ``start_stride`` frames (for frames saved every integration step).
        test_trajectory: an independent run of the same system (same topology and selection): the
            test split is then every window of it, and ``ratios`` split the main trajectory into train
            and valid only (their test fraction must be 0), so no test window shares a frame with training.
    """

    def __init__(self, topology: str, trajectory: str | None = None, selection: str = "backbone",
                 cutoff: float = 8.0, delta: int = 15, ratios: tuple[float, float, float] = (0.6, 0.2, 0.2),
                 leak_free: bool = True, num_timesteps: int = 4, batch_size: int = 8,
                 test_trajectory: str | None = None, start_stride: int = 1, velocity_span: int = 1,
                 velocity_direction: Literal["forward", "backward"] = "forward", coarse_atom: str | None = None,
                 coarse_cutoff: float | None = None, **kwargs):
        super().__init__(num_timesteps=num_timesteps, batch_size=batch_size, **kwargs)
        self.velocity = dict(velocity_span=velocity_span, velocity_direction=velocity_direction)
        self.coarse = dict(coarse_atom=coarse_atom, coarse_cutoff=coarse_cutoff)
        self.topology, self.trajectory, self.selection = topology, trajectory, selection
        self.cutoff, self.delta, self.ratios, self.leak_free = cutoff, delta, tuple(ratios), leak_free
        self.test_trajectory, self.start_stride = test_trajectory, start_stride
        if test_trajectory is not None and self.ratios[2] != 0:
            raise ConfigError(f"with a test_trajectory the main trajectory holds train and valid only: give ratios "
                              f"with a test fraction of 0 (got {list(self.ratios)})")
        self._traj = None

    def make_split(self, stage: str) -> Dataset:
        from geomol.data.datasets.trajectories.md_trajectory import MDTrajectory, MDTrajectoryDataset

        if stage == "test" and self.test_trajectory is not None:
            independent = MDTrajectory(self.topology, self.test_trajectory, selection=self.selection)
            return MDTrajectoryDataset(independent, split="test", delta=self.delta, num_timesteps=self.num_timesteps,
                                       cutoff=self.cutoff, ratios=(0.0, 0.0, 1.0), start_stride=self.start_stride,
                                       **self.velocity, **self.coarse)
        if self._traj is None:
            self._traj = MDTrajectory(self.topology, self.trajectory, selection=self.selection)
        return MDTrajectoryDataset(self._traj, split=stage, delta=self.delta, num_timesteps=self.num_timesteps,
                                   cutoff=self.cutoff, ratios=self.ratios, leak_free=self.leak_free,
                                   start_stride=self.start_stride, **self.velocity, **self.coarse)

    def prior_scale(self) -> list[float]:
        """[P] σ_p of a generative model's prior: the training windows' displacement spread (Å)."""
        return [float(s) for s in self._train_split().displacement_scale()]

    @property
    def protocol(self) -> TrajectoryProtocol:
        dataset = self._train_split()
        times = dataset.traj.time_ps
        charged = dataset.charge_scale is not None
        coarse = dataset.coarse_atom
        return TrajectoryProtocol(
            "md", tuple(dataset.offsets.tolist()), selection=self.selection, particles=dataset.particles,
            cutoff=float(self.cutoff), charge_scale=dataset.charge_scale, frame_time=1.0,
            frame_interval=float(times[1] - times[0]) if len(times) > 1 else None, time_unit="ps", length_unit="Å",
            velocity=velocity_text(dataset.velocity_span, dataset.velocity_direction), **self.velocity,
            node_features=("|v|",) + (("partial charge / charge_scale",) if charged else ()),
            coarse_atom=coarse or "", coarse_cutoff=dataset.coarse_cutoff,
            edge_features=("d (Å)",) + ((f"coarse edge ({coarse}–{coarse} < {dataset.coarse_cutoff:g} Å)",)
                                        if coarse else ()) + ("d² (Å²)",))
