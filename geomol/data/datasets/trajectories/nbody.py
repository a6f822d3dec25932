"""Charged N-body particles: a vectorised simulator and the reference dataset (``specs/EGNO.md`` §3.1).

Physics and protocol of the reference generator (``generate_dataset.py --num-train 10000
--seed 43 --sufix small``): 5 particles with charges ±1 (equal chance), initial positions
N(0, 1), initial velocities of norm 0.5 in a random direction, a one-time reflection of the
initial state into the box [−5, 5]³, Coulomb forces F_i = Σ_j q_i q_j (x_i − x_j)/‖x_i − x_j‖³
with the summed force clipped to ±100 per component, kick-drift (symplectic Euler) steps of
dt = 0.001 with a full first kick, 5000 steps saved every 100 steps: 49 frames, frame k being
the state after (k + 1)·100 steps (the initial state written to frame 0 is overwritten).

Random stream: initial states are drawn from NumPy's legacy ``RandomState(seed)`` in the
reference order (charges, positions, velocities, then the two zero-variance noise draws that
only consume numbers), train → valid → test, so *initial states are bit-identical* to the
reference files. The integration uses the same formulas in float64 but is vectorised over
simulations; trajectories match the reference to rounding at first, and chaotic close
encounters can amplify those rounding differences over 5000 steps.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from geomol.errors import DatasetError
from geomol.data.datasets.trajectories.trajectory import complete_graph, even_offsets, trajectory_graph

__all__ = ["ChargedParticles", "draw_initial_states", "simulate", "generate_splits", "load_or_generate",
           "load_official_files", "save_official_files", "NBodyDataset", "OFFICIAL_SUFFIX"]

SPLITS = ("train", "valid", "test")
OFFICIAL_SUFFIX = "_charged5_initvel1small"  # ``generate_dataset.py --sufix small`` ("nbody_small")


@dataclass(frozen=True)
class ChargedParticles:
    """Parameters of the charged-particle system and of the sampling protocol (reference values)."""

    num_particles: int = 5
    num_steps: int = 5000
    sample_every: int = 100
    dt: float = 0.001
    box_size: float = 5.0
    loc_std: float = 1.0
    vel_norm: float = 0.5
    interaction_strength: float = 1.0

    @property
    def num_saved(self) -> int:
        return self.num_steps // self.sample_every - 1

    @property
    def max_force(self) -> float:
        return 0.1 / self.dt


def _reflect_into_box(loc: np.ndarray, vel: np.ndarray, box: float) -> None:
    """One elastic reflection at the walls ±box, in place (only applied to the initial state)."""
    over, under = loc > box, loc < -box
    loc[over] = 2 * box - loc[over]
    vel[over] = -np.abs(vel[over])
    loc[under] = -2 * box - loc[under]
    vel[under] = np.abs(vel[under])


def draw_initial_states(num_simulations: int, rng: np.random.RandomState,
                        system: ChargedParticles = ChargedParticles()):
    """Charges [S, n], positions and velocities [S, 3, n] in the reference's draw order."""
    n, saved = system.num_particles, system.num_saved
    loc_std = system.loc_std * (n / 5.0) ** (1 / 3)
    charges = np.empty((num_simulations, n))
    loc = np.empty((num_simulations, 3, n))
    vel = np.empty((num_simulations, 3, n))
    for s in range(num_simulations):
        charges[s] = rng.choice(np.array([-1.0, 0.0, 1.0]), size=(n, 1), p=[0.5, 0.0, 0.5])[:, 0]
        loc[s] = rng.randn(3, n) * loc_std
        direction = rng.randn(3, n)
        vel[s] = direction * system.vel_norm / np.sqrt((direction ** 2).sum(axis=0)).reshape(1, -1)
        rng.randn(saved, 3, n), rng.randn(saved, 3, n)  # the reference's zero-variance noise draws
    _reflect_into_box(loc, vel, system.box_size)
    return charges, loc, vel


def _forces(loc: np.ndarray, qq: np.ndarray, buffers, strength: float, max_force: float) -> np.ndarray:
    """Clipped Coulomb forces [3, n, S] for positions [3, n, S] (reference formula, float64)."""
    dist, tmp, diff, force = buffers
    n = loc.shape[1]
    sq = loc[0] * loc[0] + loc[1] * loc[1] + loc[2] * loc[2]
    np.multiply(loc[0][:, None], loc[0][None], out=dist)
    for d in (1, 2):
        np.multiply(loc[d][:, None], loc[d][None], out=tmp)
        dist += tmp
    dist *= -2  # ‖a‖² + ‖b‖² − 2a·b, as the reference computes squared distances
    dist += sq[:, None]
    dist += sq[None]
    with np.errstate(invalid="ignore"):  # the diagonal can round to −0.0…1 before being masked
        np.power(dist, 1.5, out=dist)
    dist[np.arange(n), np.arange(n)] = np.inf  # no self-force
    np.divide(qq, dist, out=dist)
    if strength != 1.0:
        dist *= strength
    np.subtract(loc[:, :, None], loc[:, None, :], out=diff)
    diff *= dist
    diff.sum(axis=2, out=force)
    return np.clip(force, -max_force, max_force, out=force)


def simulate(charges: np.ndarray, loc: np.ndarray, vel: np.ndarray, system: ChargedParticles = ChargedParticles(),
             chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Integrate S simulations at once.

    Args:
        charges: [S, n]; loc, vel: [S, 3, n] initial state (after the box reflection).
        chunk: simulations integrated together (keeps the working set in cache).

    Returns:
        positions and velocities [S, T, n, 3] float64 at the T = num_steps/sample_every − 1 saved frames.
    """
    S, n = charges.shape
    out_loc = np.empty((S, system.num_saved, n, 3))
    out_vel = np.empty((S, system.num_saved, n, 3))
    for begin in range(0, S, chunk):
        end = min(begin + chunk, S)
        sl, sv = _integrate(charges[begin:end].T.copy(), loc[begin:end].transpose(1, 2, 0).copy(),
                            vel[begin:end].transpose(1, 2, 0).copy(), system)
        out_loc[begin:end], out_vel[begin:end] = sl.transpose(3, 0, 2, 1), sv.transpose(3, 0, 2, 1)
    return out_loc, out_vel


def _integrate(q: np.ndarray, loc: np.ndarray, vel: np.ndarray, system: ChargedParticles):
    """Kick-drift steps on [3, n, S] arrays; returns saved [T, 3, n, S] positions and velocities."""
    n, S = q.shape
    qq = q[:, None, :] * q[None, :, :]
    buffers = (np.empty((n, n, S)), np.empty((n, n, S)), np.empty((3, n, n, S)), np.empty((3, n, S)))
    saved_loc = np.empty((system.num_saved, 3, n, S))
    saved_vel = np.empty((system.num_saved, 3, n, S))
    dt, strength, max_force = system.dt, system.interaction_strength, system.max_force
    vel += dt * _forces(loc, qq, buffers, strength, max_force)  # full first kick, as the reference
    frame = 0
    for step in range(1, system.num_steps):
        loc += dt * vel
        if step % system.sample_every == 0:
            saved_loc[frame], saved_vel[frame] = loc, vel
            frame += 1
        vel += dt * _forces(loc, qq, buffers, strength, max_force)
    return saved_loc, saved_vel


def generate_splits(seed: int = 43, num_train: int = 10000, num_valid: int = 2000, num_test: int = 2000,
                    system: ChargedParticles = ChargedParticles()) -> dict[str, dict[str, np.ndarray]]:
    """All three splits from one random stream (train, then valid, then test, as the reference).

    Returns:
        {split: {"loc": [S, T, n, 3] float32, "vel": same, "charges": [S, n] float32}}.
    """
    rng = np.random.RandomState(seed)
    sizes = dict(train=num_train, valid=num_valid, test=num_test)
    states = [draw_initial_states(sizes[s], rng, system) for s in SPLITS]
    charges, loc, vel = (np.concatenate(parts) for parts in zip(*states))
    loc, vel = simulate(charges, loc, vel, system)
    out, begin = {}, 0
    for split in SPLITS:
        end = begin + sizes[split]
        out[split] = {"loc": loc[begin:end].astype(np.float32), "vel": vel[begin:end].astype(np.float32),
                      "charges": charges[begin:end].astype(np.float32)}
        begin = end
    return out


def _cache_file(cache_dir: Path, params: dict) -> Path:
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"nbody_charged{params['num_particles']}_{digest}.npz"


def load_or_generate(cache_dir: str | os.PathLike | None, seed: int = 43, num_train: int = 10000,
                     num_valid: int = 2000, num_test: int = 2000,
                     system: ChargedParticles = ChargedParticles()) -> dict[str, dict[str, np.ndarray]]:
    """:func:`generate_splits`, cached in ``cache_dir`` as an .npz keyed by a hash of all parameters."""
    if cache_dir is None:
        return generate_splits(seed, num_train, num_valid, num_test, system)
    params = dict(asdict(system), seed=seed, num_train=num_train, num_valid=num_valid, num_test=num_test, version=1)
    path = _cache_file(Path(cache_dir), params)
    if path.exists():
        try:
            with np.load(path) as data:
                return {s: {k: data[f"{s}_{k}"] for k in ("loc", "vel", "charges")} for s in SPLITS}
        except (OSError, KeyError, ValueError) as exc:
            raise DatasetError(f"unreadable N-body cache ({exc}); delete it to regenerate", source=path) from exc
    splits = generate_splits(seed, num_train, num_valid, num_test, system)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
    np.savez(tmp, **{f"{s}_{k}": v for s in SPLITS for k, v in splits[s].items()})
    os.replace(tmp, path)  # atomic: a concurrent reader never sees half a file
    return splits


def _official_array(path: Path, ndim: int) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"unreadable .npy ({exc})", source=path) from exc
    if array.ndim != ndim or not np.issubdtype(array.dtype, np.number):
        raise DatasetError(f"expected a numeric {ndim}-d array, found {array.dtype} {array.shape}", source=path)
    return array


def _official_split(folder: Path, split: str, suffix: str) -> dict[str, np.ndarray]:
    files = {k: folder / f"{k}_{split}{suffix}.npy" for k in ("loc", "vel", "charges", "edges")}
    loc, vel = _official_array(files["loc"], 4), _official_array(files["vel"], 4)
    charges = _official_array(files["charges"], 3)
    sims, frames, dims, n = loc.shape
    if dims != 3 or vel.shape != loc.shape:
        raise DatasetError(f"positions {loc.shape} and velocities {vel.shape} must both be "
                           "[simulations, frames, 3, particles]", source=files["vel"])
    if charges.shape != (sims, n, 1):
        raise DatasetError(f"charges {charges.shape}, expected {(sims, n, 1)}", source=files["charges"])
    q = charges[:, :, 0]
    if files["edges"].exists():  # the official loader takes q_i·q_j from here: it must agree with the charges
        edges = _official_array(files["edges"], 3)
        if edges.shape != (sims, n, n) or not np.allclose(edges, q[:, :, None] * q[:, None, :]):
            raise DatasetError("edges are not the products of the charges q_i·q_j", source=files["edges"])
    return {"loc": loc.transpose(0, 1, 3, 2).astype(np.float32), "vel": vel.transpose(0, 1, 3, 2).astype(np.float32),
            "charges": q.astype(np.float32)}


def load_official_files(directory: str | os.PathLike, suffix: str = OFFICIAL_SUFFIX) -> dict[str, dict[str, np.ndarray]]:
    """The splits written by the official generator (``simulation/dataset/generate_dataset.py``).

    Reads ``{loc,vel,charges}_{train,valid,test}<suffix>.npy`` (``edges_*`` too, if present, to check
    it) from ``directory`` or from its ``simple/`` subfolder, where the official loader looks.
    Official layout: loc and vel float64 [S, T, 3, n] (frame, xyz, particle), charges [S, n, 1].

    Returns:
        the layout of :func:`generate_splits`: {split: {"loc": [S, T, n, 3] float32, "vel": same,
        "charges": [S, n] float32}}.

    Raises:
        DatasetError: a file is missing or has another shape.
    """
    folder = Path(directory)
    if not (folder / f"loc_train{suffix}.npy").exists() and (folder / "simple").is_dir():
        folder = folder / "simple"
    return {split: _official_split(folder, split, suffix) for split in SPLITS}


def save_official_files(splits: dict[str, dict[str, np.ndarray]], directory: str | os.PathLike,
                        suffix: str = OFFICIAL_SUFFIX) -> Path:
    """Write splits (:func:`generate_splits` layout) as the official generator's files, for the official scripts.

    Writes ``{loc,vel,edges,charges}_<split><suffix>.npy`` (float64; loc/vel [S, T, 3, n], edges
    [S, n, n] = q qᵀ, charges [S, n, 1]) into ``directory``; returns it. The official loader reads
    them from ``<data_dir>/simple/``.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    for split, arrays in splits.items():
        q = np.asarray(arrays["charges"], dtype=np.float64)
        for key, value in (("loc", arrays["loc"].transpose(0, 1, 3, 2)), ("vel", arrays["vel"].transpose(0, 1, 3, 2)),
                           ("charges", q[:, :, None]), ("edges", q[:, :, None] * q[:, None, :])):
            np.save(folder / f"{key}_{split}{suffix}.npy", np.asarray(value, dtype=np.float64))
    return folder


class NBodyDataset(torch.utils.data.Dataset):
    """Charged N-body trajectories as BlockGraphs (reference "nbody_small" protocol).

    Input: frame ``frame_0`` (30); targets: frames frame_0 + ⌊Δ·p/P⌋, p = 1..P, Δ = frame_T − frame_0
    (32, 34, 36, 38, 40 for P = 5). Graph: the complete directed graph, i outer / j inner, with
    edge_attr = q_i·q_j. No node_attr (the model's only node feature is |v|). Each particle is a
    block; ``charge`` [N] is kept on the graph.

    Args:
        split: "train" | "valid" | "test".
        num_timesteps: P.
        max_samples: simulations used (default: reference sizes, 3000 train, all valid/test).
        cache_dir: where the generated .npz is kept (``None``: generate in memory, about 20 s for
            the reference 14,000 trajectories; pass ``cache_dir`` or ``data`` to share them between splits).
        data: precomputed output of :func:`generate_splits` (overrides generation).
        official_dir: read the official generator's ``loc_/vel_/charges_*.npy`` files from this folder
            instead of simulating (:func:`load_official_files`).
        seed, num_train, num_valid, num_test, system: generation parameters.
    """

    def __init__(self, split: str = "train", *, num_timesteps: int = 5, frame_0: int = 30, frame_T: int = 40,
                 max_samples: int | None = None, cache_dir=None, data=None, official_dir=None, seed: int = 43,
                 num_train: int = 10000, num_valid: int = 2000, num_test: int = 2000,
                 system: ChargedParticles = ChargedParticles()):
        if split not in SPLITS:
            raise DatasetError(f"unknown split {split!r} (train | valid | test)")
        if data is None:
            data = (load_official_files(official_dir) if official_dir is not None
                    else load_or_generate(cache_dir, seed, num_train, num_valid, num_test, system))
        arrays = data[split]
        if max_samples is None:
            max_samples = 3000 if split == "train" else len(arrays["loc"])
        self.target_frames = frame_0 + even_offsets(frame_T - frame_0, num_timesteps)
        if frame_0 < 0 or self.target_frames[-1] >= arrays["loc"].shape[1]:
            raise DatasetError(f"frames {frame_0}..{frame_T} outside the {arrays['loc'].shape[1]} saved frames")
        self.split, self.frame_0 = split, frame_0
        self.loc = arrays["loc"][:max_samples]
        self.vel = arrays["vel"][:max_samples]
        self.charges = arrays["charges"][:max_samples]
        self.edge_index = complete_graph(self.loc.shape[2])

    def __len__(self) -> int:
        return len(self.loc)

    def __getitem__(self, i: int):
        q = self.charges[i]
        qq = (q[self.edge_index[0]] * q[self.edge_index[1]])[:, None]
        return trajectory_graph(self.loc[i, self.frame_0], self.vel[i, self.frame_0],
                                self.loc[i, self.target_frames].transpose(1, 0, 2), self.edge_index, qq,
                                name=f"nbody_{self.split}_{i}", charge=torch.from_numpy(q.copy()))
