"""The shipped EGNO models load safely and predict held-out motion better than naive extrapolation.

Each model is rolled out for one window (o_P frames) from states it never trained on: fresh N-body
simulations, the Mocap test trials, and for the FKBP12 model MD of a helix made at run time with OpenMM. Its MSE
at the window end is compared with two naive predictions — standing still, and moving on at the start velocity — and with
the test S2S MSE its manifest records (the model card's number).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import geomol
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO, shared_path
from tests.rollout_fixtures import helix_md  # noqa: F401 (session fixture)

MODELS = REPO / "models"


def _load(name: str):
    for weights in (MODELS / name).glob("*.pt"):
        state = torch.load(weights, weights_only=True)  # tensors only: safe to load
        assert all(isinstance(v, torch.Tensor) for v in state.values())
    return geomol.load_model(name)


def _window_end_mse(model, states) -> dict[str, float]:
    """MSE at the end of one window (o_P frames) of the model and of two naive predictions.

    states: (x [N, 3], v [N, 3], truth at the window end [N, 3], charges [N] or None) per start.
    """
    o_p, frame_time = model.protocol.window_frames, model.protocol.frame_time
    errors = {"model": [], "still": [], "constant velocity": []}
    for x, v, truth, charges in states:
        rollout = geomol.rollout_arrays(model, x, v, charges=charges, include_start=False)
        assert rollout.frame_offsets[-1] == o_p
        for key, guess in (("model", rollout.positions[-1]), ("still", x), ("constant velocity", x + v * o_p * frame_time)):
            errors[key].append(np.mean((guess - truth) ** 2))
    mse = {key: float(np.mean(values)) for key, values in errors.items()}
    assert np.isfinite(mse["model"])
    return mse


def _assert_beats_naive(mse: dict[str, float], margin: float) -> None:
    assert mse["model"] < margin * min(mse["still"], mse["constant velocity"]), mse


def _assert_matches_card(model, mse: dict[str, float]) -> None:
    recorded = model.metrics["test_s2s_mse"]
    assert recorded / 4 < mse["model"] < 4 * recorded, (mse, recorded)


def test_nbody_model_on_fresh_simulations():
    from geomol.data.datasets.trajectories.nbody import ChargedParticles, draw_initial_states, simulate

    model = _load("egno-nbody")
    system, start = ChargedParticles(), 30
    charges, loc, vel = draw_initial_states(40, np.random.RandomState(7), system)  # the benchmark used seed 43
    positions, velocities = simulate(charges, loc, vel, system)  # [S, T, 5, 3]
    end = start + model.protocol.window_frames
    states = [(positions[s, start], velocities[s, start], positions[s, end], charges[s]) for s in range(len(charges))]
    mse = _window_end_mse(model, states)
    _assert_beats_naive(mse, 0.3)
    _assert_matches_card(model, mse)


def test_mocap_model_on_the_test_trials():
    from geomol.data.datasets.trajectories.mocap import MocapDataset

    model = _load("egno-mocap-run")
    data = MocapDataset("test", shared_path("mocap_run", "cmu_subject09_run.npz"),
                        num_timesteps=model.protocol.num_timesteps, delta=model.protocol.window_frames)
    o_p = model.protocol.window_frames
    states = [(data.positions[t][s], data.velocities[t][s], data.positions[t][s + o_p], None)
              for t, s in data.samples[::8]]
    mse = _window_end_mse(model, states)
    _assert_beats_naive(mse, 0.1)
    _assert_matches_card(model, mse)


def test_fkbp12_model_on_md_of_a_protein_it_never_saw(helix_md):
    """egno-fkbp12 on every window of the helix MD made at its frame interval (tests/rollout_fixtures.py): a
    protein it was not trained on, so the card's FKBP12 number is only a scale; the model still has to predict
    the backbone's motion better than linear extrapolation and not worse than standing still (10 % margin)."""
    from geomol.data.datasets.trajectories.md_trajectory import MDTrajectory

    model = _load("egno-fkbp12")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traj = MDTrajectory(helix_md.topology, helix_md.trajectory, selection=model.protocol.selection)
    x = traj.positions.astype(np.float64)
    o_p = model.protocol.window_frames
    states = [(x[s], x[s + 1] - x[s], x[s + o_p], traj.charges) for s in range(len(x) - o_p)]
    mse = _window_end_mse(model, states)
    assert mse["model"] < min(1.1 * mse["still"], mse["constant velocity"]), mse
    _assert_matches_card(model, mse)


def _bond_lengths(positions: np.ndarray, bonds) -> np.ndarray:
    """[F, B] lengths (Å) of ``bonds`` [B, 2] in frames [F, N, 3]."""
    bonds = np.asarray(bonds)
    return np.linalg.norm(positions[:, bonds[:, 0]] - positions[:, bonds[:, 1]], axis=-1)


@pytest.mark.parametrize("name, molecule", [("egno-flow-ethanol", "ethanol"), ("egno-flow-aspirin", "aspirin")])
def test_generative_model_keeps_its_molecule_over_a_long_seeded_rollout(name, molecule):
    """A shipped one-molecule generative model, 30 windows (45 ps) from the generator's RDKit conformer at rest: the
    bonds stay near their MD means (every bond within 0.3 Å in every frame), they move (it samples, not a frozen
    mean), the same seed repeats the rollout exactly and another seed gives another one."""
    pytest.importorskip("rdkit")
    from geomol.simulate.molecules import starting_structure

    model = _load(name)
    assert model.generative
    start = starting_structure(molecule, seed=3)
    x = start.positions[start.numbers > 1].astype(np.float64)
    rollouts = [geomol.rollout_arrays(model, x, np.zeros_like(x), windows=30, seed=seed) for seed in (2, 2, 3)]
    lengths = _bond_lengths(rollouts[0].positions[1:], model.protocol.bonds)
    worst = np.abs(lengths - np.asarray(model.protocol.bond_lengths)).max(axis=1)  # [F] per frame
    assert worst.max() < 0.3
    assert lengths.std(axis=0).min() > 0.01  # thermal motion at 500 K (MD: ~0.03 Å)
    np.testing.assert_array_equal(rollouts[0].positions, rollouts[1].positions)
    assert np.abs(rollouts[0].positions[-1] - rollouts[2].positions[-1]).max() > 0.05


def test_model_of_many_molecules_rolls_out_one_it_never_saw():
    """egno-molecules on paracetamol (held out of its training): 10 seeded windows (15 ps) from the generator's RDKit
    conformer at rest, the molecule read from the conformer's graph; every bond stays within 0.3 Å of its length in
    the start structure and the rollout repeats with its seed."""
    pytest.importorskip("rdkit")
    from geomol.data.chemistry.covalent_graph import perceive_bonds
    from geomol.data.chemistry.molecule_graph import heavy_atom_graph
    from geomol.data.dynamics.systems import MoleculeGraph
    from geomol.simulate.molecules import starting_structure

    model = _load("egno-molecules")
    assert "paracetamol" not in model.protocol.molecule
    start = starting_structure("paracetamol", seed=3)
    heavy, bonds, hydrogens = heavy_atom_graph(start.numbers, perceive_bonds(start.numbers, start.positions))
    x = start.positions[heavy].astype(np.float64)
    molecule = MoleculeGraph(start.numbers[heavy], bonds, hydrogens)
    rollouts = [geomol.rollout_arrays(model, x, np.zeros_like(x), windows=10, seed=3, molecule=molecule)
                for _ in range(2)]
    lengths = _bond_lengths(rollouts[0].positions[1:], bonds)
    assert np.abs(lengths - _bond_lengths(x[None], bonds)).max() < 0.3
    np.testing.assert_array_equal(rollouts[0].positions, rollouts[1].positions)
