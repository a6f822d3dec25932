"""Predictions of the shipped models on a few real inputs, as exact float64 hex strings.

``python -m tests.shipped_predictions OUT.json`` records them; ``tests/inference/test_shipped_predictions.py``
recomputes them and requires every number to be bit-identical to the recorded file
(``tests/inference/shipped_predictions.json``, written from the code before the graph-recipe refactor).
A recorded entry is :func:`fingerprint` of the values: their count, the first few and a SHA-256 of all.
"""
from __future__ import annotations

import hashlib
import json
import sys
import warnings

import numpy as np
import torch

import geomol
from tests.conftest import REPO, SHARED_DATA

EXAMPLE = REPO / "data" / "example"


def _hex(values) -> list[str]:
    return [float(v).hex() for v in np.asarray(values, dtype=np.float64).reshape(-1)]


def affinity() -> dict[str, list[str]]:
    """get-plb on the bundled TNKS2 example (first 4 ligands): pK mean and spread."""
    from geomol.data.io import read_ligands

    ligands = read_ligands(EXAMPLE / "tnks2_ligands.sdf")[:4]
    records = geomol.predict_affinity(EXAMPLE / "tnks2_protein.pdb", ligands, model="get-plb")
    return {"pK": _hex([r.pK for r in records]), "pK_std": _hex([r.pK_std for r in records])}


def nbody() -> list[str]:
    from geomol.data.datasets.nbody import ChargedParticles, draw_initial_states, simulate

    system = ChargedParticles()
    charges, loc, vel = draw_initial_states(2, np.random.RandomState(7), system)
    positions, velocities = simulate(charges, loc, vel, system)
    out = geomol.rollout_arrays("egno-nbody", positions[0, 30], velocities[0, 30], charges=charges[0], windows=2)
    return _hex(out.positions)


def mocap() -> list[str] | None:
    path = SHARED_DATA / "mocap_run" / "cmu_subject09_run.npz"
    if not path.exists():
        return None
    from geomol.data.datasets.mocap import MocapDataset

    data = MocapDataset("test", path, num_timesteps=5, delta=30)
    t, s = data.samples[0]
    out = geomol.rollout_arrays("egno-mocap-run", data.positions[t][s], data.velocities[t][s], windows=1)
    return _hex(out.positions)


def adk() -> list[str]:
    from MDAnalysisTests.datafiles import DCD, PSF

    from geomol.data.datasets.md_trajectory import MDTrajectory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traj = MDTrajectory(PSF, DCD, selection="backbone")
    x = traj.positions.astype(np.float64)
    out = geomol.rollout_arrays("egno-adk", x[10], x[11] - x[10], charges=traj.charges, windows=1)
    return _hex(out.positions)


def fingerprint(values: list[str] | None) -> dict | None:
    """``{'n', 'first', 'sha256'}`` of a list of hex strings (None stays None: data absent)."""
    if values is None:
        return None
    return {"n": len(values), "first": values[:4], "sha256": hashlib.sha256(" ".join(values).encode()).hexdigest()}


def record() -> dict:
    torch.set_num_threads(1)
    out = {"get-plb": affinity(), "egno-nbody": nbody(), "egno-mocap-run": mocap(), "egno-adk": adk()}
    out["get-plb"] = {key: fingerprint(values) for key, values in out["get-plb"].items()}
    return {name: out[name] if name == "get-plb" else fingerprint(out[name]) for name in out}


if __name__ == "__main__":
    with open(sys.argv[1], "w") as handle:
        json.dump(record(), handle, indent=1)
