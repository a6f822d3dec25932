"""The official EGNO data files are read as they are: N-body ``.npy``, Mocap and MD17 pickles.

Small files in the official layouts (``specs/EGNO.md`` §3) are written by the tests; the items
read from them must equal the items of geomol's own formats for the same data.
"""
import pickle

import numpy as np
import pytest
import torch

from geomol.data.datasets.trajectories.md17 import MD17Dataset
from geomol.data.datasets.trajectories.mocap import MocapDataset
from geomol.data.datasets.trajectories.nbody import (
    OFFICIAL_SUFFIX,
    NBodyDataset,
    generate_splits,
    load_official_files,
    save_official_files,
)
from geomol.data.io.array_pickle import load_array_pickle
from geomol.errors import DatasetError
from tests.builders import write_md17


@pytest.fixture(scope="module")
def nbody_splits():
    return generate_splits(seed=43, num_train=6, num_valid=3, num_test=3)


def _assert_same_items(ours, theirs):
    assert len(ours) == len(theirs)
    for i in range(len(ours)):
        a, b = ours[i], theirs[i]
        for key in ("X", "V", "X_target", "edge_index", "edge_attr"):
            assert torch.equal(a[key], b[key]), key
        if "node_attr" in a:
            assert torch.allclose(a.node_attr, b.node_attr, atol=1e-7)


def test_nbody_reads_the_official_generator_files(nbody_splits, tmp_path):
    """Official layout: loc/vel float64 [S, 49, 3, 5], charges [S, 5, 1], edges q qᵀ, in ``simple/``."""
    folder = tmp_path / "simulation" / "dataset" / "simple"
    folder.mkdir(parents=True)
    for split, arrays in nbody_splits.items():  # written by hand in the official layout, not by our writer
        q = arrays["charges"].astype(np.float64)
        np.save(folder / f"loc_{split}{OFFICIAL_SUFFIX}.npy", arrays["loc"].transpose(0, 1, 3, 2).astype(np.float64))
        np.save(folder / f"vel_{split}{OFFICIAL_SUFFIX}.npy", arrays["vel"].transpose(0, 1, 3, 2).astype(np.float64))
        np.save(folder / f"charges_{split}{OFFICIAL_SUFFIX}.npy", q[:, :, None])
        np.save(folder / f"edges_{split}{OFFICIAL_SUFFIX}.npy", q[:, :, None] * q[:, None, :])
    for directory in (folder, folder.parent):  # the folder itself, or data_dir as the official config names it
        loaded = load_official_files(directory)
        for split in nbody_splits:
            for key in ("loc", "vel", "charges"):
                assert np.array_equal(loaded[split][key], nbody_splits[split][key]), (split, key)
    for split in ("train", "test"):
        _assert_same_items(NBodyDataset(split, official_dir=folder.parent, max_samples=6),
                           NBodyDataset(split, data=nbody_splits, max_samples=6))


def test_nbody_writer_roundtrip_and_errors(nbody_splits, tmp_path):
    folder = save_official_files(nbody_splits, tmp_path / "simple")
    assert np.load(folder / f"loc_train{OFFICIAL_SUFFIX}.npy").shape == (6, 49, 3, 5)
    assert np.array_equal(load_official_files(tmp_path)["valid"]["vel"], nbody_splits["valid"]["vel"])
    edges = folder / f"edges_test{OFFICIAL_SUFFIX}.npy"
    np.save(edges, -np.load(edges))
    with pytest.raises(DatasetError, match="edges_test"):
        load_official_files(tmp_path)
    (folder / f"charges_valid{OFFICIAL_SUFFIX}.npy").unlink()
    with pytest.raises(DatasetError, match="charges_valid"):
        load_official_files(tmp_path)


@pytest.fixture(scope="module")
def mocap_npz(tmp_path_factory):
    """A small file in geomol's Mocap layout: 4 trials of a 5-joint chain, 2 splits of starts each."""
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("mocap") / "mocap.npz"
    trials = {f"trial_{i:02d}": rng.normal(size=(40 + i, 5, 3)) + [0, 5, 0] for i in range(4)}
    starts = {"train_starts": np.array([[1, 3], [1, 0], [2, 4], [2, 1]]), "valid_starts": np.array([[0, 2], [0, 5]]),
              "test_starts": np.array([[3, 1], [3, 6]])}
    np.savez(path, bones=np.array([[1, 0], [2, 1], [3, 2], [4, 3]]), **trials, **starts)
    return path


def _official_mocap(npz_path, folder, split_name="split_run.pkl", data_name="motion_run.pkl"):
    """The official pickles of the same data: (edges, trials) and (train, valid, test) dicts."""
    data = np.load(npz_path)
    trials = [data[f"trial_{i:02d}"] for i in range(4)]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / data_name, "wb") as handle:
        pickle.dump((data["bones"].tolist(), trials), handle)
    splits = []
    for name in ("train", "valid", "test"):
        rows = data[f"{name}_starts"]
        splits.append({int(t): rows[rows[:, 0] == t, 1] for t in dict.fromkeys(rows[:, 0].tolist())})
    with open(folder / split_name, "wb") as handle:
        pickle.dump(tuple(splits), handle)
    return folder / data_name


def test_mocap_reads_the_official_pickles(mocap_npz, tmp_path):
    pkl = _official_mocap(mocap_npz, tmp_path / "motion" / "dataset")
    for split in ("train", "valid", "test"):
        ours = MocapDataset(split, mocap_npz, delta=8, max_samples=4)
        for source in (pkl, pkl.parent):  # the data pickle, or the folder holding it
            _assert_same_items(MocapDataset(split, source, delta=8, max_samples=4), ours)
    walk = _official_mocap(mocap_npz, tmp_path / "walk", split_name="split.pkl", data_name="motion.pkl")
    _assert_same_items(MocapDataset("test", walk.parent, delta=8), MocapDataset("test", mocap_npz, delta=8))
    (tmp_path / "motion" / "dataset" / "split_run.pkl").unlink()
    with pytest.raises(DatasetError, match="split_run.pkl"):
        MocapDataset("train", pkl, delta=8)


def test_md17_uses_the_official_split_pickle_next_to_the_data(tmp_path):
    npz = write_md17(tmp_path / "md17_ethanol.npz")
    generated = MD17Dataset(npz, "train", delta=40, margin=50)
    split = (np.array([100, 120, 7]), np.array([130]), np.array([140, 150]))
    with open(tmp_path / "ethanol_split.pkl", "wb") as handle:  # the reference's <molecule>_split.pkl
        pickle.dump(split, handle)
    assert MD17Dataset(npz, "train", delta=40).starts.tolist() == [100, 120, 7]
    assert MD17Dataset(npz, "test", delta=40).starts.tolist() == [140, 150]
    assert len(generated) != 3  # without the pickle the split is drawn


def test_pickles_naming_other_callables_are_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("never printed",))

    bad = tmp_path / "split_run.pkl"
    bad.write_bytes(pickle.dumps((Evil(), {}, {})))
    with pytest.raises(DatasetError, match="builtins.print"):
        load_array_pickle(bad)
    good = tmp_path / "ok.pkl"
    good.write_bytes(pickle.dumps(({1: np.arange(3)}, [np.float64(2.5)], "x"), protocol=2))
    value = load_array_pickle(good)
    assert np.array_equal(value[0][1], np.arange(3)) and value[1][0] == 2.5
