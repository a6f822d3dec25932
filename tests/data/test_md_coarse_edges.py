"""Coarse edges of an MD graph (a protein's Cα within a longer cutoff), on MDAnalysisTests' adenylate kinase."""
import warnings

import numpy as np
import pytest
import torch

from geomol.data.dynamics.graphs import radius_edges
from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.data.dynamics.systems import CoarseNodes
from geomol.errors import ConfigError

datafiles = pytest.importorskip("MDAnalysisTests.datafiles")


@pytest.fixture(scope="module")
def adk_module():
    from geomol.tasks import MDTrajectoryDataModule

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = MDTrajectoryDataModule(datafiles.PSF, datafiles.DCD, cutoff=3.5, delta=3, num_timesteps=2,
                                      coarse_atom="CA", coarse_cutoff=10.0)
        data.setup()
    return data


def test_coarse_edges_join_every_close_pair_of_coarse_atoms_and_no_other():
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [6.0, 0.0, 0.0], [7.0, 0.0, 0.0], [30.0, 0.0, 0.0]],
                     dtype=torch.float64)
    plain_index, plain = radius_edges(x, 1.5)
    index, attr = radius_edges(x, 1.5, torch.tensor([0, 2, 4]), 8.0)
    assert attr.shape == (index.size(1), 2) and plain.shape == (plain_index.size(1), 1)
    local = attr[:, 1] == 0
    assert torch.equal(index[:, local], plain_index) and torch.equal(attr[local, :1], plain)
    # coarse atoms 0, 2, 4: only 0–2 (6 Å) is within 8 Å, both directions, flagged, with its distance
    assert sorted(map(tuple, index[:, ~local].T.tolist())) == [(0, 2), (2, 0)]
    assert torch.allclose(attr[~local, 0], torch.full((2,), 6.0, dtype=torch.float64))


def test_dataset_graph_has_the_calpha_pairs(adk_module):
    item = adk_module.splits["train"][0]
    names = np.asarray(adk_module.splits["train"].traj.names)
    flagged = item.edge_attr[:, 1] == 1
    i, j = item.edge_index[:, flagged]
    assert flagged.any() and (names[i] == "CA").all() and (names[j] == "CA").all()
    assert (item.edge_attr[flagged, 0] < 10.0).all()
    ca = np.flatnonzero(names == "CA")
    distance = torch.cdist(item.X[ca].double(), item.X[ca].double())
    assert int(flagged.sum()) == int(((distance < 10.0) & (distance > 0)).sum())


def test_rollout_graph_is_the_dataset_graph(adk_module):
    dataset = adk_module.splits["train"]
    protocol = TrajectoryProtocol.from_dict(adk_module.protocol.to_dict())
    assert (protocol.coarse_atom, protocol.coarse_cutoff) == ("CA", 10.0)
    assert protocol.edge_features == ("d (Å)", "coarse edge (CA–CA < 10 Å)", "d² (Å²)")
    item = dataset[1]
    graph = protocol.state_graph(item.X, item.V, torch.as_tensor(dataset.traj.charges, dtype=torch.float32),
                                 protocol.coarse_nodes(dataset.traj.names))
    assert torch.equal(graph.edge_index, item.edge_index) and torch.equal(graph.edge_attr, item.edge_attr)
    with pytest.raises(ConfigError, match="coarse edges"):
        protocol.state_graph(item.X, item.V, torch.as_tensor(dataset.traj.charges, dtype=torch.float32))
    with pytest.raises(ConfigError, match="no atom named 'CA'"):
        protocol.coarse_nodes(["N", "C", "O"])


def test_coarse_settings_are_checked():
    from geomol.data.datasets.trajectories.md_trajectory import MDTrajectory, MDTrajectoryDataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traj = MDTrajectory(datafiles.PSF, datafiles.DCD, selection="backbone", stop=20)
    with pytest.raises(ConfigError, match="both"):
        MDTrajectoryDataset(traj, delta=3, num_timesteps=2, coarse_atom="CA")
    with pytest.raises(ConfigError, match="no atom named 'CB'"):
        MDTrajectoryDataset(traj, delta=3, num_timesteps=2, coarse_atom="CB", coarse_cutoff=8.0)
    with pytest.raises(ConfigError, match="atom particles"):
        MDTrajectoryDataset(traj, delta=3, num_timesteps=2, coarse_atom="CA", coarse_cutoff=8.0, particles="residue")
    assert CoarseNodes.named(traj.names, "CA").index.tolist() == np.flatnonzero(np.asarray(traj.names) == "CA").tolist()
    with pytest.raises(Exception, match="coarse"):
        TrajectoryProtocol.from_dict({"kind": "md", "target_offsets": [3], "selection": "backbone", "cutoff": 3.5,
                                      "coarse_cutoff": 8.0})


@pytest.mark.parametrize("span", [1, 4])
def test_file_rollout_start_state_reads_a_backward_velocity_over_its_span(span):
    from geomol.inference.dynamics.rollout import state_at
    from geomol.inference.dynamics.rollout_files import start_state

    protocol = TrajectoryProtocol("md", (3, 7, 11, 15), selection="backbone", cutoff=3.5, velocity_span=span,
                                  velocity_direction="backward")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        universe, atoms = protocol.open_trajectory(datafiles.PSF, datafiles.DCD)
        positions = np.stack([atoms.positions.copy() for _ in universe.trajectory[:12]])
    x, v, note = start_state(universe, atoms, 10, protocol=protocol)
    expected_x, expected_v, _ = state_at(protocol, positions, 10)
    assert np.allclose(x, expected_x) and np.allclose(v, expected_v, atol=1e-6)
    assert note == f"(x[10] − x[{10 - span}]) / {span}"


def test_a_model_with_coarse_edges_trains_saves_and_rolls_out_a_file(tmp_path):
    import geomol
    from geomol.tasks import MDTrajectoryDataModule
    from tests.rollout_fixtures import TINY_EGNO, train_tiny_egno

    data = MDTrajectoryDataModule(datafiles.PSF, datafiles.DCD, cutoff=3.5, coarse_atom="CA", coarse_cutoff=10.0,
                                  batch_size=4)
    path = train_tiny_egno(tmp_path, data, {**TINY_EGNO, "edge_features": 3}, steps=3)
    model = geomol.load_model(str(path))
    assert (model.protocol.coarse_atom, model.protocol.coarse_cutoff) == ("CA", 10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = geomol.rollout(model, datafiles.PSF, datafiles.DCD, start=0, windows=2, out=tmp_path / "roll.xyz",
                                progress=False)
    frames = _positions(tmp_path / "roll.xyz")
    assert np.isfinite(frames).all() and len(frames) == len(result.frames) == 1 + 2 * 4
    assert np.abs(frames[1:] - frames[:1]).max() > 0  # it moved


def _positions(path) -> np.ndarray:
    """[F, N, 3] every frame of a trajectory file."""
    import MDAnalysis as mda

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        universe = mda.Universe(str(path))
        return np.stack([universe.atoms.positions.copy() for _ in universe.trajectory])
