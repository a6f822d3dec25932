"""Generic MD trajectories through MDAnalysis, on MDAnalysisTests' adenylate kinase PSF + DCD."""
import warnings

import numpy as np
import pytest
import torch
from torch_geometric.loader import DataLoader

from geomol.data.datasets.trajectories.md_trajectory import MDTrajectory, MDTrajectoryDataset, md_split_ranges, md_target_offsets
from geomol.errors import ConfigError, EmptySelectionError, TrajectoryError

datafiles = pytest.importorskip("MDAnalysisTests.datafiles")


@pytest.fixture(scope="module")
def adk():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MDTrajectory(datafiles.PSF, datafiles.DCD, selection="backbone", stop=40)


def test_reference_protocol_numbers():
    assert md_target_offsets(15, 4).tolist() == [3, 7, 11, 15]
    # the AdK numbers of the spec: 4186 frames with velocities, Δ = 15
    ranges = md_split_ranges(4186, 15)
    assert ranges == {"train": (0, 2502), "valid": (2502, 3336), "test": (3336, 4171)}
    # reference: the last training targets reach frame 2501 + 15 = 2516, inside the validation range
    leak_free = md_split_ranges(4186, 15, leak_free=True)
    assert leak_free["train"] == (0, 2487) and leak_free["valid"] == (2502, 3321)


def test_trajectory_reading(adk):
    assert adk.positions.shape == (40, 855, 3) and adk.positions.dtype == np.float32
    assert adk.residue_block.max() == 213 and adk.charges is not None
    assert adk.elements[:4] == ["N", "C", "C", "O"] and adk.names[:2] == ["N", "CA"]
    assert np.array_equal(adk.frame_numbers, np.arange(40))


@pytest.mark.parametrize("leak_free", [False, True])
def test_split_integrity(adk, leak_free):
    sets = {s: MDTrajectoryDataset(adk, split=s, delta=3, num_timesteps=2, leak_free=leak_free)
            for s in ("train", "valid", "test")}
    inputs = {s: {d.frames(i)[0] for i in range(len(d))} for s, d in sets.items()}
    used = {s: inputs[s] | {int(f) for i in range(len(d)) for f in d.frames(i)[1]} for s, d in sets.items()}
    assert not (inputs["train"] & inputs["valid"]) and not (inputs["valid"] & inputs["test"])
    assert max(max(u) for u in used.values()) <= 38  # the last frame only provides a velocity
    assert all(len(d) for d in sets.values())
    assert sum(len(d) for d in sets.values()) == (39 - 3 if not leak_free else 39 - 3 - 2 * 3)
    leaks = (used["train"] & inputs["valid"]) | (used["valid"] & inputs["test"])
    assert bool(leaks) != leak_free  # the reference split leaks targets into the next range; leak_free does not


@pytest.mark.parametrize("stride", [2, 3, 5])
def test_start_stride_keeps_every_kth_window_of_each_split(adk, stride):
    for split in ("train", "valid", "test"):
        every = MDTrajectoryDataset(adk, split=split, delta=3, num_timesteps=2, leak_free=True)
        strided = MDTrajectoryDataset(adk, split=split, delta=3, num_timesteps=2, leak_free=True, start_stride=stride)
        expected = [every.frames(i) for i in range(0, len(every), stride)]
        got = [strided.frames(i) for i in range(len(strided))]
        assert [s for s, _ in got] == [s for s, _ in expected]
        assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(got, expected))
        with pytest.raises(IndexError):
            strided.frames(len(strided))
    with pytest.raises(ConfigError):
        MDTrajectoryDataset(adk, delta=3, num_timesteps=2, start_stride=0)


def test_items_and_batching(adk):
    ds = MDTrajectoryDataset(adk, split="valid", delta=7, num_timesteps=4, cutoff=8.0)
    start, targets = ds.frames(1)
    assert targets.tolist() == [start + 1, start + 3, start + 5, start + 7]
    g = ds[1]
    pos = torch.from_numpy(adk.positions)
    assert torch.equal(g.X, pos[start]) and torch.equal(g.V, pos[start + 1] - pos[start])
    assert torch.equal(g.X_target, pos[targets].transpose(0, 1))
    d = torch.cdist(g.X.double(), g.X.double())
    brute = ((d < 8.0) & ~torch.eye(855, dtype=torch.bool)).nonzero().T
    assert torch.equal(g.edge_index, brute)
    assert torch.allclose(g.edge_attr[:, 0].double(), d[brute[0], brute[1]], atol=1e-4)
    assert g.node_attr.max() == 1.0 and g.block_len.sum() == 855 and g.B.size(0) == 214
    batch = next(iter(DataLoader(ds, batch_size=2)))
    assert batch.block_id.max() == 427 and batch.edge_index.max() == 1709


def test_errors(adk):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(EmptySelectionError):
            MDTrajectory(datafiles.PSF, datafiles.DCD, selection="resname XYZ", stop=2)
        with pytest.raises(TrajectoryError):
            MDTrajectory(datafiles.PSF, datafiles.GRO, stop=2)  # atom counts differ
    with pytest.raises(TrajectoryError):
        MDTrajectoryDataset(adk, delta=60)
    with pytest.raises(ConfigError):
        MDTrajectoryDataset(adk, delta=2, num_timesteps=4)


def test_residues_as_particles(adk):
    ds = MDTrajectoryDataset(adk, split="train", delta=7, num_timesteps=4, cutoff=12.0, particles="residue")
    g = ds[0]
    first = adk.positions[0, adk.residue_block == 5].mean(0)
    assert g.X.shape == (214, 3) and torch.allclose(g.X[5], torch.from_numpy(first), atol=1e-4)
    assert g.block_len.eq(1).all() and g.B.size(0) == 214 and g.X_target.shape == (214, 4, 3)
    net = np.add.reduceat(adk.charges, np.flatnonzero(np.diff(adk.residue_block, prepend=-1)))
    assert net.max() < 0  # backbone-only residue charges are all negative: scaled by the largest magnitude
    assert torch.allclose(g.node_attr[:, 0].double(), torch.from_numpy(net / np.abs(net).max()), atol=1e-6)


def test_a_backward_velocity_over_the_target_spacing(adk):
    """With velocity_direction="backward" and span s, an item's V is (x[t] − x[t−s]) / s and no window starts before
    frame s; the reference default stays the forward one-frame difference."""
    span = 4
    data = MDTrajectoryDataset(adk, split="train", delta=15, num_timesteps=4, velocity_span=span,
                               velocity_direction="backward")
    assert data.begin >= span
    for i in (0, len(data) // 2):
        start, _ = data.frames(i)
        expected = (data.positions[start] - data.positions[start - span]) / span
        np.testing.assert_allclose(data[i].V.numpy(), expected, rtol=1e-6)
    forward = MDTrajectoryDataset(adk, split="train", delta=15, num_timesteps=4)
    start, _ = forward.frames(0)
    np.testing.assert_allclose(forward[0].V.numpy(), forward.positions[start + 1] - forward.positions[start])
    with pytest.raises(ConfigError, match="backward difference"):
        MDTrajectoryDataset(adk, split="train", velocity_span=3, velocity_direction="forward")
    scale = data.displacement_scale(samples=20)
    assert scale.shape == (4,) and (np.diff(scale) > 0).all()  # further targets move further


@pytest.mark.parametrize("content", [None, b"not a trajectory at all"], ids=["missing", "unreadable"])
@pytest.mark.parametrize("suffix", [".xtc", ".dcd"])
def test_a_missing_or_unreadable_trajectory_is_one_error_and_nothing_else(tmp_path, monkeypatch, suffix, content):
    """MDAnalysis' half-made reader used to print a second traceback ("Exception ignored in ReaderBase.__del__")."""
    import gc
    import sys

    trajectory = tmp_path / f"run{suffix}"
    if content is not None:
        trajectory.write_bytes(content)
    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    with pytest.raises(TrajectoryError, match="file not found" if content is None else "cannot open"):
        MDTrajectory(datafiles.PSF, trajectory, stop=2)
    gc.collect()
    assert ignored == []
