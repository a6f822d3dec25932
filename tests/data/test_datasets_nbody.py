"""Charged N-body simulator and dataset: physics sanity, reproducibility, protocol, splits, cache."""
import numpy as np
import pytest
import torch
from torch_geometric.loader import DataLoader

from geomol.data.datasets.trajectories.nbody import (
    ChargedParticles,
    NBodyDataset,
    draw_initial_states,
    generate_splits,
    load_or_generate,
    simulate,
)
from geomol.errors import DatasetError


@pytest.fixture(scope="module")
def splits():
    return generate_splits(seed=3, num_train=100, num_valid=20, num_test=20)


def _energy(loc, vel, q):
    """Kinetic + Coulomb energy per simulation and frame; loc/vel [S, T, n, 3], q [S, n]."""
    d = np.linalg.norm(loc[..., :, None, :] - loc[..., None, :, :], axis=-1)
    i, j = np.triu_indices(q.shape[1], 1)
    pair = (q[:, None, i] * q[:, None, j]) / d[..., i, j]
    return 0.5 * (vel ** 2).sum((-1, -2)) + pair.sum(-1)


def test_simulator_sanity(splits):
    train = splits["train"]
    assert train["loc"].shape == (100, 49, 5, 3) and train["vel"].shape == (100, 49, 5, 3)
    assert np.isfinite(train["loc"]).all() and np.isfinite(train["vel"]).all()
    assert set(np.unique(train["charges"]).tolist()) == {-1.0, 1.0}
    energy = _energy(train["loc"].astype(np.float64), train["vel"].astype(np.float64), train["charges"])
    drift = np.abs(energy[:, -1] - energy[:, 0]) / np.abs(energy[:, 0])
    assert np.median(drift) < 0.05  # symplectic steps conserve energy except at clipped close encounters


def test_reproducible_with_seed(splits):
    again = generate_splits(seed=3, num_train=100, num_valid=20, num_test=20)
    assert all(np.array_equal(splits[s][k], again[s][k]) for s in splits for k in splits[s])
    other = generate_splits(seed=4, num_train=100, num_valid=20, num_test=20)
    assert not np.array_equal(splits["train"]["loc"], other["train"]["loc"])
    # one random stream: valid continues where train stopped, as the reference generator
    assert not np.array_equal(splits["train"]["charges"][:20], splits["valid"]["charges"])


def test_initial_state_protocol():
    system = ChargedParticles()
    charges, loc, vel = draw_initial_states(50, np.random.RandomState(0), system)
    assert np.allclose(np.linalg.norm(vel, axis=1), 0.5)
    assert np.all(np.abs(loc) <= 5.0)
    # the reference draw order: choice, randn(3, n), randn(3, n), two noise draws per simulation
    rng = np.random.RandomState(0)
    q0 = rng.choice(np.array([-1.0, 0.0, 1.0]), size=(5, 1), p=[0.5, 0, 0.5])[:, 0]
    loc0 = rng.randn(3, 5)
    assert np.array_equal(charges[0], q0) and np.array_equal(loc[0], loc0)


def test_integrator_matches_hand_kick_drift():
    system = ChargedParticles(num_steps=300, sample_every=100)
    charges, loc, vel = draw_initial_states(2, np.random.RandomState(5), system)
    out_loc, out_vel = simulate(charges, loc.copy(), vel.copy(), system)
    assert out_loc.shape == (2, 2, 5, 3)
    for s in range(2):
        x, v, q = loc[s].T.copy(), vel[s].T.copy(), charges[s]

        def force(x):
            r = x[:, None] - x[None]
            d3 = np.linalg.norm(r, axis=-1) ** 3
            np.fill_diagonal(d3, np.inf)
            return (((q[:, None] * q[None]) / d3)[..., None] * r).sum(1).clip(-100, 100)

        v += 0.001 * force(x)  # full first kick
        saved = []
        for step in range(1, 300):
            x += 0.001 * v
            if step % 100 == 0:
                saved.append((x.copy(), v.copy()))
            v += 0.001 * force(x)
        for frame, (xs, vs) in enumerate(saved):  # frame 0 is the state after 100 steps
            assert np.allclose(out_loc[s, frame], xs, atol=1e-9) and np.allclose(out_vel[s, frame], vs, atol=1e-9)


def test_dataset_items_follow_the_reference_protocol(splits):
    ds = NBodyDataset("train", data=splits, num_timesteps=5, max_samples=64)
    assert len(ds) == 64 and len(NBodyDataset("valid", data=splits)) == 20
    assert ds.target_frames.tolist() == [32, 34, 36, 38, 40]
    g = ds[3]
    loc = torch.from_numpy(splits["train"]["loc"][3])
    assert torch.equal(g.X, loc[30]) and torch.equal(g.V, torch.from_numpy(splits["train"]["vel"][3][30]))
    assert torch.equal(g.X_target, loc[[32, 34, 36, 38, 40]].transpose(0, 1))
    assert g.edge_index[:, :5].tolist() == [[0, 0, 0, 0, 1], [1, 2, 3, 4, 0]] and g.edge_index.size(1) == 20
    q = torch.from_numpy(splits["train"]["charges"][3])
    assert torch.equal(g.edge_attr[:, 0], q[g.edge_index[0]] * q[g.edge_index[1]])
    batch = next(iter(DataLoader(ds, batch_size=8)))
    assert batch.X_target.shape == (40, 5, 3) and batch.edge_index.max() == 39 and batch.num_graphs == 8
    assert batch.block_id.max() == 39
    with pytest.raises(DatasetError):
        NBodyDataset("train", data=splits, frame_0=45, frame_T=55)


def test_cache_roundtrip(tmp_path):
    system = ChargedParticles(num_steps=1000)
    first = load_or_generate(tmp_path, seed=1, num_train=4, num_valid=2, num_test=2, system=system)
    files = list(tmp_path.glob("nbody_charged5_*.npz"))
    assert len(files) == 1
    second = load_or_generate(tmp_path, seed=1, num_train=4, num_valid=2, num_test=2, system=system)
    assert np.array_equal(first["test"]["loc"], second["test"]["loc"])
    load_or_generate(tmp_path, seed=2, num_train=4, num_valid=2, num_test=2, system=system)
    assert len(list(tmp_path.glob("*.npz"))) == 2  # parameters are part of the key
    files[0].write_bytes(b"not an npz")
    with pytest.raises(DatasetError):
        load_or_generate(tmp_path, seed=1, num_train=4, num_valid=2, num_test=2, system=system)
