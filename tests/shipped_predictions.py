"""Predictions of the shipped models on a few real inputs, every value as float64.

``python -m tests.shipped_predictions OUT.npz`` records them (one array per ``model/quantity``);
``tests/inference/test_shipped_predictions.py`` recomputes them and compares every number with the recorded
file (``tests/inference/shipped_predictions.npz``) to float32 round-off.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import torch

import geomol
from tests.conftest import REPO, SHARED_DATA

EXAMPLE = REPO / "data" / "example"


def _values(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1)


AFFINITY_MODELS = ("get-plb", "contact-corpus")


def affinity(model: str) -> dict[str, np.ndarray]:
    """A shipped affinity model on the bundled TNKS2 example (first 4 ligands): pK mean and spread."""
    from geomol.data.io import read_ligands

    ligands = read_ligands(EXAMPLE / "tnks2_ligands.sdf")[:4]
    records = geomol.predict_affinity(EXAMPLE / "tnks2_protein.pdb", ligands, model=model)
    return {"pK": _values([r.pK for r in records]), "pK_std": _values([r.pK_std for r in records])}


def nbody() -> np.ndarray:
    from geomol.data.datasets.nbody import ChargedParticles, draw_initial_states, simulate

    system = ChargedParticles()
    charges, loc, vel = draw_initial_states(2, np.random.RandomState(7), system)
    positions, velocities = simulate(charges, loc, vel, system)
    out = geomol.rollout_arrays("egno-nbody", positions[0, 30], velocities[0, 30], charges=charges[0], windows=2)
    return _values(out.positions)


def mocap() -> np.ndarray | None:
    path = SHARED_DATA / "mocap_run" / "cmu_subject09_run.npz"
    if not path.exists():
        return None
    from geomol.data.datasets.mocap import MocapDataset

    data = MocapDataset("test", path, num_timesteps=5, delta=30)
    t, s = data.samples[0]
    out = geomol.rollout_arrays("egno-mocap-run", data.positions[t][s], data.velocities[t][s], windows=1)
    return _values(out.positions)


def adk() -> np.ndarray:
    from MDAnalysisTests.datafiles import DCD, PSF

    from geomol.data.datasets.md_trajectory import MDTrajectory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traj = MDTrajectory(PSF, DCD, selection="backbone")
    x = traj.positions.astype(np.float64)
    out = geomol.rollout_arrays("egno-adk", x[10], x[11] - x[10], charges=traj.charges, windows=1)
    return _values(out.positions)


def record() -> dict[str, np.ndarray]:
    """``{'model/quantity': values}`` of every shipped model whose inputs are present."""
    torch.set_num_threads(1)
    out = {f"{model}/{key}": values for model in AFFINITY_MODELS for key, values in affinity(model).items()}
    out.update({"egno-nbody/positions": nbody(), "egno-mocap-run/positions": mocap(), "egno-adk/positions": adk()})
    return {name: values for name, values in out.items() if values is not None}


if __name__ == "__main__":
    np.savez_compressed(sys.argv[1], **record())
