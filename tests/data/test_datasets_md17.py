"""MD17 from an sGDML npz (a tiny file of that format written by the test)."""
import numpy as np
import pytest
import torch

from geomol.data.datasets.trajectories.md17 import MD17Dataset, md17_split
from geomol.errors import DatasetError
from tests.builders import write_md17


@pytest.fixture(scope="module")
def ethanol_npz(tmp_path_factory):
    return write_md17(tmp_path_factory.mktemp("md17") / "md17_ethanol.npz")


def test_split_protocol():
    train, valid, test = md17_split(1000, seed=100, margin=100)
    assert (len(train), len(valid), len(test)) == (80, 40, 40)
    allidx = np.concatenate([train, valid, test])
    assert len(np.unique(allidx)) == 160 and allidx.min() >= 100 and allidx.max() < 900
    assert np.array_equal(md17_split(1000, seed=100, margin=100)[0], train)  # seeded
    # same legacy draw as the reference: the first draw is choice(arange(n), 10 %, replace=False)
    assert np.array_equal(train, np.random.RandomState(100).choice(np.arange(800), 80, replace=False) + 100)


def test_items(ethanol_npz):
    ds = MD17Dataset(ethanol_npz, "train", delta=40, num_timesteps=8, margin=50)
    R = np.load(ethanol_npz)["R"]
    assert len(ds) == 29 and ds.molecule == "ethanol"  # int(0.1·(399 − 100))
    g = ds[2]
    st = int(ds.starts[2])
    assert g.X.shape == (3, 3) and torch.allclose(g.X.double(), torch.from_numpy(R[st, :3]), atol=1e-6)
    assert torch.allclose(g.V.double(), torch.from_numpy(R[st + 1, :3] - R[st, :3]), atol=1e-6)
    expected = R[st + np.array([5, 10, 15, 20, 25, 30, 35, 40]), :3].transpose(1, 0, 2)  # ⌊Δp/P⌋
    assert torch.allclose(g.X_target.double(), torch.from_numpy(expected), atol=1e-6)
    # C–C and C–O bonded (< 1.6 Å); the C…O pair is 2-hop; stick (0, 1) for ethanol
    edges = {tuple(e): a.tolist() for e, a in zip(g.edge_index.T.tolist(), g.edge_attr)}
    assert edges[(0, 1)] == [6, 6, 1, 1] and edges[(1, 2)] == [6, 8, 1, 0] and edges[(2, 0)] == [8, 6, 2, 0]
    assert len(edges) == 6
    assert torch.allclose(g.node_attr[:, 0], torch.tensor([6 / 8, 6 / 8, 1.0]))
    assert g.A.tolist() == [8, 8, 10]


def test_split_file_and_errors(ethanol_npz, tmp_path):
    split = tmp_path / "split.npz"
    np.savez(split, train=np.array([100, 120]), valid=np.array([130]), test=np.array([140]))
    assert MD17Dataset(ethanol_npz, "valid", split_file=split, delta=40).starts.tolist() == [130]
    with pytest.raises(DatasetError, match="past"):
        MD17Dataset(ethanol_npz, "train", split_file=split, delta=300)
    bad = tmp_path / "bad.npz"
    np.savez(bad, R=np.zeros((5, 2, 3)), z=np.array([1, 1]))
    with pytest.raises(DatasetError, match="heavy"):
        MD17Dataset(bad)
    with pytest.raises(DatasetError, match="margin"):
        MD17Dataset(ethanol_npz)  # the reference margins need > 20000 frames


@pytest.mark.parametrize("content, what", [(b'{"R": [[0, 0, 0]], "z": [6]}', "looks like JSON"),
                                           (b"R z\n1 2 3\n", "a text file"),
                                           (b"\x93NUMPY\x01\x00v\x00", "a single NumPy array")])
def test_a_file_that_is_not_an_npz_says_what_it_is(tmp_path, content, what):
    path = tmp_path / "md17_ethanol.npz"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match="not an .npz archive") as raised:
        MD17Dataset(path)
    assert what in str(raised.value) and "pickle" not in str(raised.value)
