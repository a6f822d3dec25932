"""GFN2-xTB Langevin generator: MD17 layout, determinism, exact resume, read back by both MD17 readers."""
from __future__ import annotations

import json

import numpy as np
import pytest

from geomol.data.datasets.trajectories.md17 import STICK_PAIRS
from geomol.errors import ConfigError
from geomol.simulate.langevin import LangevinIntegrator, LangevinState, kinetic_temperature
from geomol.simulate.molecules import MD17_MOLECULES, starting_structure


def _settings(**kw):
    from geomol.simulate import SmallMoleculeSettings

    return SmallMoleculeSettings(**{"molecule": "ethanol", "seed": 3, **kw})


def _run(tmp_path, frames, **kw):
    pytest.importorskip("tblite")
    from geomol.simulate import simulate_small_molecule

    return simulate_small_molecule(_settings(**kw.pop("settings", {})), tmp_path, frames, progress=False, **kw)


def test_every_stick_pair_is_a_bond():
    for name, smiles in MD17_MOLECULES.items():
        structure = starting_structure(name, seed=0)
        heavy = int((structure.numbers > 1).sum())
        assert (structure.numbers[:heavy] > 1).all() and (structure.numbers[heavy:] == 1).all()
        for pair in STICK_PAIRS[name]:
            assert tuple(sorted(pair)) in structure.bonds, (name, pair)


def test_harmonic_oscillator_samples_the_temperature():
    """BAOAB on independent harmonic wells: the kinetic and the configurational temperature are T."""
    k, masses = 50.0, np.full(64, 12.0)  # kcal/mol/Å², amu
    integrator = LangevinIntegrator(lambda x: (0.5 * k * (x ** 2).sum(), -k * x), masses, timestep=1.0,
                                    temperature=300.0, friction=0.05)
    state = integrator.initial_state(np.zeros((64, 3)), seed=0)
    kinetic, potential = [], []
    for step in range(3000):
        integrator.step(state)
        if step >= 500:
            kinetic.append(kinetic_temperature(masses, state.velocities))
            potential.append((state.positions ** 2).mean() * k / 0.0019872042586408316)
    assert np.mean(kinetic) == pytest.approx(300.0, rel=0.03)
    assert np.mean(potential) == pytest.approx(300.0, rel=0.05)


def test_state_round_trip_continues_the_same_noise(tmp_path):
    integrator = LangevinIntegrator(lambda x: (0.0, -x), np.ones(4), 0.5, 500.0, 0.1)
    state = integrator.initial_state(np.zeros((4, 3)), seed=7)
    integrator.step(state)
    np.savez(tmp_path / "state.npz", **state.to_arrays())
    with np.load(tmp_path / "state.npz") as data:
        copy = LangevinState.from_arrays(data)
    for _ in range(3):
        integrator.step(state), integrator.step(copy)
    np.testing.assert_array_equal(state.positions, copy.positions)
    assert copy.step == state.step == 4


def test_writes_md17_layout_that_reads_back(tmp_path):
    summary = _run(tmp_path, 6)
    with np.load(tmp_path / "md17_ethanol.npz") as data:
        R, z, E, F = data["R"], data["z"], data["E"], data["F"]
        settings = json.loads(str(data["settings"]))
    assert R.shape == (6, 9, 3) and E.shape == (6, 1) and F.shape == (6, 9, 3) and list(z[:3]) == [6, 6, 8]
    assert settings["engine"] == "tblite" and settings["temperature"] == 500.0 and settings["timestep"] == 0.5
    # 0.5 fs at ≤ 0.1 Å/fs: atoms move by well under 0.1 Å per frame, and forces are ~ −dE/dx
    assert 0 < np.abs(np.diff(R, axis=0)).max() < 0.1
    dE = E[1:, 0] - E[:-1, 0]
    work = -0.5 * ((F[1:] + F[:-1]) * (R[1:] - R[:-1])).sum(axis=(1, 2))
    np.testing.assert_allclose(dE, work, atol=0.02 * np.abs(dE).max() + 1e-3)
    assert summary["frames"] == 6 and summary["steps"] == 5 and (tmp_path / "md17_ethanol.json").exists()

    from geomol.data.datasets.trajectories.md17 import MD17Dataset

    dataset = MD17Dataset(tmp_path / "md17_ethanol.npz", split_file=_tiny_split(tmp_path), delta=2, num_timesteps=2)
    graph = dataset[0]
    assert graph.X.shape[0] == 3 and graph.X_target.shape[:2] == (3, 2)


def _tiny_split(tmp_path):
    path = tmp_path / "split.npz"
    np.savez(path, train=np.array([0, 1]), valid=np.array([2]), test=np.array([1]))
    return path


def test_seed_makes_it_deterministic_and_resume_equals_one_run(tmp_path):
    _run(tmp_path / "whole", 7)
    _run(tmp_path / "parts", 3, checkpoint_every=2)
    _run(tmp_path / "parts", 7, checkpoint_every=2)  # extended later
    _run(tmp_path / "again", 7)
    _run(tmp_path / "other", 7, settings={"seed": 4})
    whole, parts, again, other = (np.load(tmp_path / d / "md17_ethanol.npz")["R"]
                                  for d in ("whole", "parts", "again", "other"))
    np.testing.assert_array_equal(whole, parts)
    np.testing.assert_array_equal(whole, again)
    assert other.shape == whole.shape and not np.allclose(whole[-1], other[-1])


def test_killed_run_continues_where_it_stopped(tmp_path, monkeypatch):
    from geomol.simulate import xtb

    _run(tmp_path / "whole", 8)
    original, calls = xtb.XTBForceField.__call__, {"n": 0}

    def dies_at_sixth_call(self, positions):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return original(self, positions)

    monkeypatch.setattr(xtb.XTBForceField, "__call__", dies_at_sixth_call)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "killed", 8, checkpoint_every=2, settings={"save_every": 1})
    monkeypatch.setattr(xtb.XTBForceField, "__call__", original)
    assert not (tmp_path / "killed" / "md17_ethanol.npz").exists()
    _run(tmp_path / "killed", 8, checkpoint_every=2)
    np.testing.assert_array_equal(np.load(tmp_path / "whole" / "md17_ethanol.npz")["F"],
                                  np.load(tmp_path / "killed" / "md17_ethanol.npz")["F"])


def test_other_settings_in_the_same_folder_are_refused(tmp_path):
    _run(tmp_path, 2)
    with pytest.raises(ConfigError, match="temperature"):
        _run(tmp_path, 3, settings={"temperature": 300.0})


def test_rigid_body_free_thermostat_keeps_the_molecule_from_drifting_and_tumbling():
    """Internal motions thermostatted, zero linear and angular momentum kept, temperature over 3n − 6."""
    from geomol.simulate.langevin import internal_degrees_of_freedom, remove_rigid_body_motion

    rng = np.random.default_rng(0)
    masses = np.array([12.0, 14.0, 16.0, 1.0, 1.0])
    start = rng.standard_normal((5, 3))
    k = 30.0  # every pair held at its starting distance by a spring: rotation and translation invariant
    pairs = np.array([(i, j) for i in range(5) for j in range(i + 1, 5)])
    rest = np.linalg.norm(start[pairs[:, 0]] - start[pairs[:, 1]], axis=1)

    def springs(x):
        d = x[pairs[:, 0]] - x[pairs[:, 1]]
        length = np.linalg.norm(d, axis=1)
        f = (-k * (length - rest) / length)[:, None] * d
        forces = np.zeros_like(x)
        np.add.at(forces, pairs[:, 0], f), np.add.at(forces, pairs[:, 1], -f)
        return 0.5 * k * ((length - rest) ** 2).sum(), forces

    integrator = LangevinIntegrator(springs, masses, 0.5, 500.0, 0.01, remove_rigid_body=True)
    state = integrator.initial_state(start, seed=1)
    dof = internal_degrees_of_freedom(start, masses)
    temperatures = []
    for step in range(4000):
        integrator.step(state)
        temperatures.append(kinetic_temperature(masses, state.velocities, dof))
    v, x = state.velocities, state.positions
    np.testing.assert_allclose(remove_rigid_body_motion(x, v, masses), v, atol=1e-10)
    com = (masses[:, None] * x).sum(0) / masses.sum()
    np.testing.assert_allclose(com, (masses[:, None] * start).sum(0) / masses.sum(), atol=1e-8)
    assert dof == 9 and np.mean(temperatures[1000:]) == pytest.approx(500.0, rel=0.1)
