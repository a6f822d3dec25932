"""Mocap "Run" (real CMU data from ../shared/data/mocap_run): fixed split and the reference protocol."""
import numpy as np
import pytest
import torch
from torch_geometric.loader import DataLoader

from geomol.data.datasets.trajectories.mocap import MocapDataset
from geomol.errors import DatasetError
from tests.conftest import shared_path


@pytest.fixture(scope="module")
def mocap_file():
    return shared_path("mocap_run", "cmu_subject09_run.npz")


def test_split_sizes_and_trials(mocap_file):
    sets = {s: MocapDataset(s, mocap_file) for s in ("train", "valid", "test")}
    assert {s: len(d) for s, d in sets.items()} == {"train": 200, "valid": 240, "test": 240}
    trials = {s: set(d.samples[:, 0].tolist()) for s, d in sets.items()}
    assert trials == {"train": {1, 2, 5, 6, 10}, "valid": {0, 4, 9}, "test": {3, 7, 8}}
    # reference: the first 40 starts of each training trial (not the first 200 rows of the file)
    rows = np.load(mocap_file)["train_starts"]
    for trial in (1, 2, 5, 6, 10):
        assert np.array_equal(sets["train"].samples[sets["train"].samples[:, 0] == trial, 1],
                              rows[rows[:, 0] == trial, 1][:40])


def test_sample_construction(mocap_file):
    ds = MocapDataset("valid", mocap_file)
    trial, start = ds.samples[5]
    X = np.load(mocap_file)[f"trial_{trial:02d}"]
    g = ds[5]
    assert torch.allclose(g.X.double(), torch.from_numpy(X[start]), atol=1e-5)
    assert torch.allclose(g.V.double(), torch.from_numpy(X[start + 1] - X[start]), atol=1e-5)
    targets = X[start + np.arange(26, 31)].transpose(1, 0, 2)  # st+26 … st+30 (last=True, Δ=30, P=5)
    assert torch.allclose(g.X_target.double(), torch.from_numpy(targets), atol=1e-5)
    assert g.edge_index.shape == (2, 130)
    assert (g.edge_attr == 1).sum() == 60 and (g.edge_attr == 2).sum() == 70
    assert torch.allclose(g.node_attr[:, 0].double(), torch.from_numpy(X[start][:, 1] / 10 / ds.height_scale),
                          atol=1e-6)
    assert MocapDataset("test", mocap_file, height_feature=False)[0].get("node_attr") is None
    batch = next(iter(DataLoader(ds, batch_size=12)))
    assert batch.X.shape == (372, 3) and batch.edge_index.shape == (2, 1560)


def test_bad_file(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, bones=np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(DatasetError, match="bad.npz"):
        MocapDataset("train", bad)


def test_json_named_npz_says_what_it_is(tmp_path):
    bad = tmp_path / "cmu_subject09_run.npz"
    bad.write_text('{"bones": [[0, 1]]}')
    with pytest.raises(DatasetError, match="not an .npz archive: it is text that looks like JSON") as raised:
        MocapDataset("train", bad)
    assert "pickle" not in str(raised.value)
