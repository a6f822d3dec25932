"""EGNO and the EGNN baseline (rollout and one-step) on BlockGraph batches: the model contract, features, metrics."""
import pytest
import torch
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from geomol.data.datasets.trajectories.nbody import NBodyDataset, generate_splits
from geomol.data.datasets.trajectories.trajectory import trajectory_graph
from geomol.errors import ConfigError
from geomol.models.dynamics import per_graph_mse, s2s_mse, s2t_mse, trajectory_loss
from geomol.models.egno import EGNO
from geomol.models.egnn import EGNNDynamics
from geomol.nn.neighbors import radius_graph
from geomol.testing import INVARIANT, POSITION, VECTOR
from geomol.testing.model_contract import ModelContract

P = 4


def make_graph(x, v, seed, node_features=0, dtype=torch.float64):
    """A sample with invariant dataset features (random per edge/node, fixed by seed) on a radius graph
    whose topology does not depend on x, and targets that are x moved by v per frame."""
    gen = torch.Generator().manual_seed(seed)
    n = len(x)
    edge_index = radius_graph(torch.randn(n, 3, generator=gen), 2.0)
    node_attr = torch.rand(n, node_features, generator=gen, dtype=dtype) if node_features else None
    target = x.unsqueeze(1) + v.unsqueeze(1) * torch.arange(1, P + 1, dtype=dtype).view(1, P, 1)
    return trajectory_graph(x, v, target, edge_index, torch.rand(edge_index.size(1), 1, generator=gen, dtype=dtype),
                            node_attr=node_attr, dtype=dtype)


def random_graphs(sizes=(7, 12, 9), seed=4, **kwargs):
    gen = torch.Generator().manual_seed(seed)
    return [make_graph(torch.randn(n, 3, dtype=torch.float64, generator=gen) * 2,
                       torch.randn(n, 3, dtype=torch.float64, generator=gen), seed=n, **kwargs) for n in sizes]


def permuted_graph(graph, perm: torch.Tensor):
    """The trajectory graph with its nodes in the order ``perm`` [N] (node i of the result is node perm[i])."""
    inverse = torch.argsort(perm)
    return trajectory_graph(graph.X[perm], graph.V[perm], graph.X_target[perm], inverse[graph.edge_index],
                            graph.edge_attr, dtype=torch.float64)


class DynamicsContract(ModelContract):
    """Trajectory models: positions X move, velocities V only rotate; per node and frame x, v [N, P, 3], h [N, P, H]."""

    outputs = {"x": POSITION, "v": VECTOR, "h": INVARIANT}
    train_steps, lr, loss_drop, train_dtype = 20, 1e-3, 0.5, torch.float32

    def make_graphs(self):
        return random_graphs()

    def training_graphs(self):
        """One fixed batch of 20 charged-particle N-body samples (F = 1: |v|; E = 2: charge product, d²)."""
        data = generate_splits(seed=7, num_train=20, num_valid=1, num_test=1)
        return list(NBodyDataset("train", data=data, num_timesteps=P))

    def run(self, model, graphs):
        return model(Batch.from_data_list(list(graphs)))._asdict()

    def geometry(self, graph):
        return {"X": (graph.X, POSITION), "V": (graph.V, VECTOR)}

    def with_geometry(self, graph, X, V):
        g = graph.clone()
        g.X, g.V = X, V
        return g

    def permuted(self, graph, generator):
        perm = torch.randperm(graph.num_nodes, generator=generator)
        return permuted_graph(graph, perm), {name: perm for name in self.outputs}

    def loss(self, model, graphs):
        batch = Batch.from_data_list(graphs)
        return trajectory_loss(model(batch).x, batch.X_target)


class TestEGNO(DynamicsContract):
    def make_model(self, seed):
        torch.manual_seed(seed)
        model = EGNO(node_features=1, edge_features=2, hidden=16, num_layers=2, num_timesteps=P).double()
        with torch.no_grad():  # signed spectral weights exercise every path
            for conv in list(model.time_convs) + list(model.vector_convs):
                conv.weight.normal_(0, 0.3)
        return model.eval()


class TestEGNNRollout(DynamicsContract):
    """The EGNN baseline rolled out autoregressively over P frames."""

    def make_model(self, seed):
        torch.manual_seed(seed)
        return EGNNDynamics(node_features=1, edge_features=2, hidden=16, num_layers=2, num_timesteps=P).double().eval()


class TestEGNNTeacherForced(TestEGNNRollout):
    """The rolled-out EGNN as teacher forcing trains it: each step starts from the true previous frame, whose
    positions move with the inputs under E(3) and permutations."""

    def run(self, model, graphs):
        batch = Batch.from_data_list(list(graphs))
        return model(batch, batch.X_target)._asdict()

    def geometry(self, graph):
        return {**super().geometry(graph), "X_target": (graph.X_target, POSITION)}

    def with_geometry(self, graph, X, V, X_target):
        g = super().with_geometry(graph, X, V)
        g.X_target = X_target
        return g

    def loss(self, model, graphs):
        batch = Batch.from_data_list(graphs)
        return trajectory_loss(model(batch, batch.X_target).x, batch.X_target)


def test_teacher_forcing_feeds_true_frames_forward():
    """Fed its own free rollout as the teacher, the model predicts that rollout again; a change in true frame p
    changes the predictions from step p + 2 on (frame p is the input of step p + 1), never before."""
    torch.manual_seed(3)
    model = EGNNDynamics(node_features=1, edge_features=2, hidden=16, num_layers=2, num_timesteps=P).double()
    batch = Batch.from_data_list(random_graphs())
    with torch.no_grad():
        free = model(batch).x
        torch.testing.assert_close(model(batch, free).x, free, atol=1e-12, rtol=0)
        teacher = batch.X_target.clone()
        forced = model(batch, teacher).x
        teacher[:, 1] += 0.3
        moved = model(batch, teacher).x
    torch.testing.assert_close(moved[:, :2], forced[:, :2], atol=0, rtol=0)
    assert not torch.allclose(moved[:, 2], forced[:, 2])
    assert not torch.allclose(forced, free)  # the true frames differ from the model's own
    with pytest.raises(ConfigError, match="teacher positions have shape"):
        model(batch, teacher[:, :2])


class TestEGNNOneStep(TestEGNNRollout):
    """The EGNN-paper protocol: one step to the single target frame."""

    def make_model(self, seed):
        torch.manual_seed(seed)
        return EGNNDynamics(node_features=1, edge_features=2, hidden=16, num_layers=2, num_timesteps=1).double().eval()

    def make_graphs(self):
        graphs = random_graphs()
        for g in graphs:
            g.X_target = g.X_target[:, :1]
        return graphs

    def training_graphs(self):
        graphs = super().training_graphs()
        for g in graphs:
            g.X_target = g.X_target[:, -1:]
        return graphs


def test_node_attr_norms_and_feature_check():
    torch.manual_seed(0)
    model = EGNO(node_features=2, edge_features=2, hidden=16, num_layers=2, num_timesteps=P).double()
    g1, g2 = random_graphs((6, 6), seed=6, node_features=1)
    g2.node_attr = g2.node_attr * 3
    alone = model(Batch.from_data_list([g1])).x
    assert torch.allclose(model(Batch.from_data_list([g1, g2])).x[:6], alone)  # default: batch-independent
    model.node_attr_norm = "batch_max"  # the reference: features depend on the batch
    assert not torch.allclose(model(Batch.from_data_list([g1, g2])).x[:6], model(Batch.from_data_list([g1])).x)
    with pytest.raises(ConfigError, match="2 node and 2 edge features"):
        EGNO(node_features=1, edge_features=2, hidden=8, num_layers=1, num_timesteps=4)(Batch.from_data_list([g1]))
    with pytest.raises(ConfigError, match="num_modes"):
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


def test_reference_datasets_feed_the_models():
    """Feature widths of the reference Mocap config (F 2: |v|, body-part flag; E 2: edge type, d²), and the
    per-graph score of a batch equals the same score computed sample by sample."""
    from tests.conftest import shared_path
    from geomol.data.datasets.trajectories.mocap import MocapDataset
    from geomol.models.dynamics import dynamics_inputs

    mocap = MocapDataset("train", shared_path("mocap_run", "cmu_subject09_run.npz"))
    batch = next(iter(DataLoader(mocap, batch_size=3)))
    inputs = dynamics_inputs(batch)
    assert inputs.h.shape == (93, 2) and inputs.edge_attr.shape == (batch.edge_index.size(1), 2)
    torch.testing.assert_close(inputs.h[:, 0], batch.V.norm(dim=-1))
    for model in (EGNO(node_features=2, edge_features=2, hidden=16, num_layers=2, num_timesteps=5),
                  EGNNDynamics(node_features=2, edge_features=2, hidden=16, num_layers=2, num_timesteps=5)):
        with torch.no_grad():
            pred = model(batch)
            score = s2t_mse(pred.x, batch.X_target, batch.batch, batch.num_graphs)
            one_by_one = [(model(Batch.from_data_list([g])).x - g.X_target).pow(2).mean() for g in batch.to_data_list()]
        assert pred.x.shape == batch.X_target.shape == (93, 5, 3)
        torch.testing.assert_close(score, torch.stack(one_by_one), rtol=1e-4, atol=1e-6)
