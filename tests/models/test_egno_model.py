"""EGNO and the EGNN baseline on BlockGraph batches: equivariance, permutation, batching, training, metrics."""
import pytest
import torch
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from geomol.data.datasets.nbody import NBodyDataset, generate_splits
from geomol.data.datasets.trajectory import trajectory_graph
from geomol.errors import ConfigError
from geomol.models.dynamics import per_graph_mse, s2s_mse, s2t_mse, trajectory_loss
from geomol.models.egno import EGNO
from geomol.models.egnn import EGNNDynamics
from geomol.nn.neighbors import radius_graph
from geomol.testing import assert_equivariant

P = 4


def make_graph(x, v, seed, edge_features=1, node_features=1, dtype=torch.float64):
    """A sample with invariant dataset features (random per edge/node, fixed by seed) on a radius graph."""
    gen = torch.Generator().manual_seed(seed)
    n = len(x)
    edge_index = radius_graph(torch.randn(n, 3, generator=gen), 2.0)  # topology independent of x
    return trajectory_graph(x, v, torch.zeros(n, P, 3), edge_index,
                            torch.rand(edge_index.size(1), edge_features, generator=gen, dtype=dtype),
                            node_attr=torch.rand(n, node_features, generator=gen, dtype=dtype), dtype=dtype)


def models():
    torch.manual_seed(0)
    egno = EGNO(node_features=2, edge_features=2, hidden=16, num_layers=2, num_timesteps=P).double()
    with torch.no_grad():  # signed spectral weights exercise every path
        for conv in list(egno.time_convs) + list(egno.vector_convs):
            conv.weight.normal_(0, 0.3)
    return [egno, EGNNDynamics(node_features=2, edge_features=2, hidden=16, num_layers=2, num_timesteps=P).double()]


@pytest.mark.parametrize("model", models(), ids=["egno", "egnn"])
def test_predicted_trajectories_are_e3_equivariant(model):
    n = 12
    gen = torch.Generator().manual_seed(3)
    x0, v0 = torch.randn(n, 3, dtype=torch.float64, generator=gen) * 2, torch.randn(n, 3, dtype=torch.float64,
                                                                                    generator=gen)

    def fn(coords):
        graph = make_graph(coords[:n], coords[n:] - coords[:n], seed=5)  # velocity carried as x + v
        pred = model(Batch.from_data_list([graph]))
        return [pred.x, pred.x + pred.v], [pred.h]

    assert_equivariant(fn, torch.cat([x0, x0 + v0]), atol=1e-8)


def test_permutation_and_batch_consistency():
    model = models()[0]
    gen = torch.Generator().manual_seed(4)
    graphs = [make_graph(torch.randn(n, 3, dtype=torch.float64, generator=gen),
                         torch.randn(n, 3, dtype=torch.float64, generator=gen), seed=n) for n in (7, 12, 9)]
    batch = Batch.from_data_list(graphs)
    together = model(batch)
    start = 0
    for g in graphs:
        alone = model(Batch.from_data_list([g]))
        n = g.num_nodes
        assert torch.allclose(together.x[start:start + n], alone.x, atol=1e-10)
        assert torch.allclose(together.h[start:start + n], alone.h, atol=1e-10)
        start += n
    g = graphs[1]
    perm = torch.randperm(g.num_nodes, generator=gen)
    inverse = torch.argsort(perm)
    permuted = trajectory_graph(g.X[perm], g.V[perm], g.X_target[perm], inverse[g.edge_index], g.edge_attr,
                                node_attr=g.node_attr[perm], dtype=torch.float64)
    ref, out = model(Batch.from_data_list([g])), model(Batch.from_data_list([permuted]))
    assert torch.allclose(out.x, ref.x[perm], atol=1e-10) and torch.allclose(out.h, ref.h[perm], atol=1e-10)


def test_node_attr_norms_and_feature_check():
    model = models()[0]
    gen = torch.Generator().manual_seed(6)
    g1 = make_graph(torch.randn(6, 3, dtype=torch.float64, generator=gen), torch.randn(6, 3, dtype=torch.float64),
                    seed=1)
    g2 = make_graph(torch.randn(6, 3, dtype=torch.float64, generator=gen), torch.randn(6, 3, dtype=torch.float64),
                    seed=2)
    g2.node_attr = g2.node_attr * 3
    alone = model(Batch.from_data_list([g1])).x
    assert torch.allclose(model(Batch.from_data_list([g1, g2])).x[:6], alone)  # default: batch-independent
    model.node_attr_norm = "batch_max"  # the reference: features depend on the batch
    assert not torch.allclose(model(Batch.from_data_list([g1, g2])).x[:6], model(Batch.from_data_list([g1])).x)
    with pytest.raises(ConfigError):
        EGNO(node_features=1, edge_features=2, hidden=8, num_layers=1, num_timesteps=4)(Batch.from_data_list([g1]))
    with pytest.raises(ConfigError):
        EGNO(num_timesteps=4, num_modes=4)


def test_metrics():
    pred = torch.zeros(5, 3, 3)
    target = torch.zeros(5, 3, 3)
    target[:2, -1] = 1.0  # graph 0: last frame off by 1 in xyz
    target[2:, 0] = 2.0  # graph 1: first frame off by 2
    batch = torch.tensor([0, 0, 1, 1, 1])
    assert torch.allclose(per_graph_mse(pred, target, batch, 2), torch.tensor([[0.0, 0, 1], [4.0, 0, 0]]))
    assert torch.allclose(s2s_mse(pred, target, batch, 2), torch.tensor([1.0, 0.0]))
    assert torch.allclose(s2t_mse(pred, target, batch, 2), torch.tensor([1 / 3, 4 / 3]))
    assert abs(trajectory_loss(pred, target).item() - (2 * 3 + 3 * 3 * 4) / 45) < 1e-7


def test_fifty_steps_on_nbody_lower_the_loss():
    torch.manual_seed(0)
    data = generate_splits(seed=7, num_train=60, num_valid=1, num_test=1)
    loader = DataLoader(NBodyDataset("train", data=data, num_timesteps=5), batch_size=20, shuffle=True)
    model = EGNO(node_features=1, edge_features=2, hidden=32, num_layers=2, num_timesteps=5)
    optimiser = torch.optim.Adam(model.parameters(), lr=5e-4)
    losses = []
    while len(losses) < 50:
        for batch in loader:
            loss = trajectory_loss(model(batch).x, batch.X_target)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.7 * first, (first, last)


def test_reference_datasets_feed_the_models():
    """Feature widths of the reference configs: Mocap (F 2, E 2) and AdK backbone (F 2, E 2)."""
    from tests.conftest import shared_path
    from geomol.data.datasets.mocap import MocapDataset

    mocap = MocapDataset("train", shared_path("mocap_run", "cmu_subject09_run.npz"))
    batch = next(iter(DataLoader(mocap, batch_size=3)))
    for model in (EGNO(node_features=2, edge_features=2, hidden=16, num_layers=2, num_timesteps=5),
                  EGNNDynamics(node_features=2, edge_features=2, hidden=16, num_layers=2, num_timesteps=5)):
        pred = model(batch)
        assert pred.x.shape == batch.X_target.shape == (93, 5, 3)
        assert torch.isfinite(s2t_mse(pred.x, batch.X_target, batch.batch, batch.num_graphs)).all()
