"""CMU motion capture, subject 9 "Run" (``../shared/data/mocap_run``), reference protocol (``specs/EGNO.md`` §3.2).

File: ``cmu_subject09_run.npz`` with ``bones`` [30, 2], ``trial_00`` … ``trial_10`` [T, 31, 3]
joint positions (raw ASF/AMC length units, y up) and the fixed split ``{train,valid,test}_starts``
[rows, 2] of (trial, start frame). The official EGNO files are read too: ``motion_run.pkl``
(``(bones, trials)``) with its split ``split_run.pkl`` (three dicts trial → start frames) next
to it, or ``motion.pkl`` with ``split.pkl`` ("walk"); pass the ``.pkl`` or the folder holding them.

Protocol: velocities are forward differences V_t = X_{t+1} − X_t (each trial then loses its last
frame); per split, the first ``max_samples // #trials`` starts of each trial are used (train 40
per trial = 200, valid and test all 80 = 240); input frame st; targets st + Δ + p − P for
p = 1..P (``last=True``: st+26 … st+30 for Δ = 30, P = 5). Graph: bones (hop 1) and pairs of joints
sharing a neighbour (hop 2), 130 directed edges, edge_attr = hop.

Node feature ``node_attr`` = the joint height y/10 scaled by a dataset constant (the maximum of
y/10 over all frames of the training trials). The reference divides by the maximum over the
*current batch* instead; :class:`geomol.models.egno.EGNO` reproduces that with
``node_attr_norm="batch_max"`` (the result does not depend on our constant). Caveat: the height
is not invariant to rotations that tilt the y axis or to vertical translations, so with this
feature the model is only equivariant to rotations about y and horizontal translations; pass
``height_feature=False`` for a fully E(3)-invariant input.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from geomol.data.paths import shared_data
from geomol.errors import DatasetError
from geomol.data.io.array_pickle import load_array_pickle
from geomol.data.io.npz import open_npz
from geomol.data.datasets.trajectories.trajectory import bond_and_two_hop_edges, last_offsets, even_offsets, trajectory_graph

__all__ = ["MocapDataset", "MOCAP_FILE"]

MOCAP_FILE = ("mocap_run", "cmu_subject09_run.npz")
"""Where the file lies under the shared data folder (:func:`geomol.data.paths.shared_data`)."""
_DEFAULT_MAX_SAMPLES = {"train": 200, "valid": 600, "test": 600}


# official data file → its split file (``motion/dataset.py``), "run" first when a folder holds both
_OFFICIAL_FILES = {"motion_run.pkl": "split_run.pkl", "motion.pkl": "split.pkl"}


def _official_path(path: Path) -> Path | None:
    """The official data pickle that ``path`` designates (itself, or inside the folder), else None."""
    if path.is_dir():
        return next((path / name for name in _OFFICIAL_FILES if (path / name).exists()), None)
    return path if path.suffix == ".pkl" else None


def _read_official(path: Path, split_file: Path | None):
    """Trials, bones and (trial, start) rows per split from the official pickles."""
    data = load_array_pickle(path)
    split_file = split_file or path.with_name(_OFFICIAL_FILES.get(path.name, "split_run.pkl"))
    splits = load_array_pickle(split_file)
    try:
        edges, trials = data
        bones = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        trials = [np.asarray(t, dtype=np.float64) for t in trials]
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"expected (edges [[child, parent], ...], [trial [T, joints, 3], ...]) ({exc})",
                           source=path) from exc
    if not (isinstance(splits, (tuple, list)) and len(splits) == 3 and all(isinstance(s, dict) for s in splits)):
        raise DatasetError("expected (train, valid, test) dicts of trial → start frames", source=split_file)
    starts = {name: np.array([(int(trial), int(start)) for trial, frames in mapping.items()
                              for start in np.asarray(frames).reshape(-1)], dtype=np.int64).reshape(-1, 2)
              for name, mapping in zip(("train", "valid", "test"), splits)}
    return trials, bones, starts


def _read(path: Path, split_file: Path | None = None):
    official = _official_path(path)
    if official is not None:
        trials, bones, starts = _read_official(official, split_file)
        _check_trials(trials, official)
        return trials, bones, starts
    try:
        data = open_npz(path)
        trial_keys = sorted(k for k in data.files if k.startswith("trial_"))
        trials = [np.asarray(data[k], dtype=np.float64) for k in trial_keys]
        bones = np.asarray(data["bones"], dtype=np.int64)
        starts = {s: np.asarray(data[f"{s}_starts"], dtype=np.int64) for s in ("train", "valid", "test")}
    except (OSError, ValueError, KeyError) as exc:
        raise DatasetError(f"not a mocap npz with bones, trial_XX and *_starts ({exc})", source=path) from exc
    _check_trials(trials, path)
    return trials, bones, starts


def _check_trials(trials: list[np.ndarray], path: Path) -> None:
    if not trials or any(t.ndim != 3 or t.shape[1:] != trials[0].shape[1:] or t.shape[2] != 3 for t in trials):
        raise DatasetError("trials must be [T, joints, 3] arrays with the same joints", source=path)


def _first_per_trial(rows: np.ndarray, max_samples: int) -> np.ndarray:
    """The first ⌊max_samples / #trials⌋ (trial, start) rows of each trial, trials in file order."""
    trials = list(dict.fromkeys(rows[:, 0].tolist()))
    each = max_samples // len(trials)
    return np.concatenate([rows[rows[:, 0] == t][:each] for t in trials])


class MocapDataset(torch.utils.data.Dataset):
    """Mocap "Run" trajectory samples as BlockGraphs (31 joints, one block each).

    Args:
        split: "train" | "valid" | "test".
        path: the npz file (default ``mocap_run/cmu_subject09_run.npz`` under the shared data folder,
            ``$GEOMOL_SHARED_DATA``: see :mod:`geomol.data.paths`), or the official ``motion_run.pkl`` /
            ``motion.pkl`` (or the folder holding it).
        split_file: the official split pickle, when it is not the usual sibling of ``path``.
        num_timesteps: P. delta: Δ, frames to the last target.
        last: targets are the last P frames up to Δ (reference) instead of evenly spaced ⌊Δp/P⌋.
        max_samples: samples per split before the per-trial cut (reference 200 / 600 / 600).
        height_feature: add ``node_attr`` = scaled joint height (reference); False for E(3) invariance.
    """

    def __init__(self, split: str = "train", path: str | os.PathLike | None = None, *, num_timesteps: int = 5,
                 delta: int = 30, last: bool = True, max_samples: int | None = None, height_feature: bool = True,
                 split_file: str | os.PathLike | None = None):
        if split not in _DEFAULT_MAX_SAMPLES:
            raise DatasetError(f"unknown split {split!r} (train | valid | test)")
        path = Path(path) if path is not None else shared_data(*MOCAP_FILE)
        trials, bones, starts = _read(path, Path(split_file) if split_file else None)
        self.split, self.path = split, path
        self.positions = [t[:-1] for t in trials]  # X_t, paired with V_t = X_{t+1} − X_t
        self.velocities = [t[1:] - t[:-1] for t in trials]
        self.offsets = last_offsets(delta, num_timesteps) if last else even_offsets(delta, num_timesteps)
        self.samples = _first_per_trial(starts[split], max_samples or _DEFAULT_MAX_SAMPLES[split])
        for trial, start in self.samples:
            if trial >= len(trials) or start < 0 or start + self.offsets[-1] >= len(self.positions[trial]):
                raise DatasetError(f"start {start} + {self.offsets[-1]} is outside trial {trial}", source=path)
        n_joints = trials[0].shape[1]
        adjacency = np.zeros((n_joints, n_joints), dtype=bool)
        adjacency[bones[:, 0], bones[:, 1]] = adjacency[bones[:, 1], bones[:, 0]] = True
        self.edge_index, hop = bond_and_two_hop_edges(adjacency)
        self.edge_attr = hop[:, None].astype(np.float32)
        train_trials = np.unique(starts["train"][:, 0])
        self.height_scale = max(float(self.positions[t][..., 1].max()) / 10 for t in train_trials)
        self.height_feature = height_feature

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        trial, start = (int(a) for a in self.samples[i])
        x = self.positions[trial][start]
        node_attr = (x[:, 1:2] / 10) / self.height_scale if self.height_feature else None
        return trajectory_graph(x, self.velocities[trial][start],
                                self.positions[trial][start + self.offsets].transpose(1, 0, 2),
                                self.edge_index, self.edge_attr, node_attr=node_attr,
                                name=f"mocap_run_{self.split}_t{trial}_f{start}")

