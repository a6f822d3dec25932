"""EGNOFlow, the generative EGNO: the model contract on its denoiser, an equivariant and repeatable sampler, and a
flow that learns a bimodal future a mean-squared-error model averages away."""
from __future__ import annotations

import torch
from e3nn import o3
from torch_geometric.data import Batch

from geomol.data.datasets.trajectories.trajectory import trajectory_graph
from geomol.models.egno_flow import EGNOFlow, centred_noise
from geomol.testing import INVARIANT, POSITION, VECTOR
from geomol.testing.model_contract import ModelContract
from tests.models.test_egno_model import P, permuted_graph, random_graphs


def _with_noisy_window(graphs, seed=11):
    gen = torch.Generator().manual_seed(seed)
    for g in graphs:
        g.window = g.X.unsqueeze(1) + 0.5 * torch.randn(g.num_nodes, P, 3, generator=gen, dtype=g.X.dtype)
        g.tau = torch.rand(1, generator=gen, dtype=g.X.dtype)
    return graphs


def _model(seed, dtype=torch.float64):
    torch.manual_seed(seed)
    model = EGNOFlow(node_features=1, edge_features=2, hidden=16, num_layers=2, num_timesteps=P, num_modes=2,
                     prior_scale=[0.2, 0.3, 0.4, 0.5]).to(dtype)
    with torch.no_grad():  # signed spectral weights exercise every path
        for conv in list(model.time_convs) + list(model.vector_convs):
            conv.weight.normal_(0, 0.3)
    return model.eval()


class TestEGNOFlowDenoiser(ModelContract):
    """The network X̂¹(X^τ, τ, state): the noisy window moves with the positions, the result too."""

    outputs = {"x": POSITION, "displacement": INVARIANT}
    train_steps, lr, loss_drop, train_dtype = 30, 3e-3, 0.7, torch.float32

    def make_model(self, seed):
        return _model(seed)

    def make_graphs(self):
        return _with_noisy_window(random_graphs())

    def training_graphs(self):
        return random_graphs(sizes=(6, 8, 7, 9), dtype=torch.float32)

    def run(self, model, graphs):
        from geomol.models.dynamics import dynamics_inputs

        batch = Batch.from_data_list(list(graphs))
        x = model.denoise(dynamics_inputs(batch), batch.window, batch.tau)
        return {"x": x, "displacement": (x - batch.X.unsqueeze(1)).norm(dim=-1)}

    def geometry(self, graph):
        return {"X": (graph.X, POSITION), "V": (graph.V, VECTOR), "window": (graph.window, POSITION)}

    def with_geometry(self, graph, X, V, window):
        g = graph.clone()
        g.X, g.V, g.window = X, V, window
        return g

    def permuted(self, graph, generator):
        perm = torch.randperm(graph.num_nodes, generator=generator)
        moved = permuted_graph(graph, perm)
        moved.window, moved.tau = graph.window[perm], graph.tau
        return moved, {"x": perm, "displacement": perm}

    def loss(self, model, graphs):
        return model.loss(Batch.from_data_list(list(graphs)), torch.Generator().manual_seed(0))


def test_a_seeded_sample_repeats_and_another_seed_differs():
    model, batch = _model(1), Batch.from_data_list(random_graphs())
    first = model.sample(batch, torch.Generator().manual_seed(5))
    assert torch.equal(first, model.sample(batch, torch.Generator().manual_seed(5)))
    assert not torch.allclose(first, model.sample(batch, torch.Generator().manual_seed(6)))


def test_sampling_is_equivariant_given_the_transformed_noise():
    model, graphs = _model(2), random_graphs()
    batch = Batch.from_data_list(graphs)
    rotation = o3.rand_matrix(dtype=torch.float64) @ torch.diag(torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64))
    shift = torch.randn(3, dtype=torch.float64)
    noise = centred_noise((batch.num_nodes, P, 3), batch.batch, batch.num_graphs, torch.Generator().manual_seed(0),
                          dtype=torch.float64)
    prior = batch.X.unsqueeze(1) + model.prior_scale.double().view(1, -1, 1) * noise
    out = model.sample(batch, prior=prior)
    moved = batch.clone()
    moved.X, moved.V = batch.X @ rotation.T + shift, batch.V @ rotation.T
    out_moved = model.sample(moved, prior=prior @ rotation.T + shift)
    torch.testing.assert_close(out_moved, out @ rotation.T + shift, atol=1e-9, rtol=0)


def test_the_flow_learns_two_futures_that_a_mean_would_average():
    """Two atoms whose bond either stretches to 2 Å or shrinks to 1 Å (half the samples each): the flow's samples
    land near one of the two lengths, not in between where the squared-error optimum lies."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    graphs = []
    for k in range(64):
        x = torch.tensor([[0.0, 0.0, 0.0], [1.5, 0.0, 0.0]])
        length = 2.0 if k % 2 else 1.0
        target = torch.tensor([[0.0, 0.0, 0.0], [length, 0.0, 0.0]]).unsqueeze(1).expand(-1, 2, -1)
        target = target - target.mean(0) + x.mean(0)
        graphs.append(trajectory_graph(x, torch.zeros(2, 3), target, torch.tensor([[0, 1], [1, 0]]),
                                       torch.ones(2, 1)))
    model = EGNOFlow(node_features=1, edge_features=2, hidden=32, num_layers=2, num_timesteps=2, num_modes=2,
                     prior_scale=0.3, sampling_steps=20)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    batch = Batch.from_data_list(graphs)
    for _ in range(400):
        optimiser.zero_grad()
        model.loss(batch, gen).backward()
        optimiser.step()
    with torch.no_grad():
        samples = model.sample(batch, torch.Generator().manual_seed(1))
    lengths = (samples.view(64, 2, 2, 3)[:, 1, -1] - samples.view(64, 2, 2, 3)[:, 0, -1]).norm(dim=-1)
    near = torch.minimum((lengths - 1.0).abs(), (lengths - 2.0).abs())
    assert float(near.median()) < 0.15 and float((lengths > 1.5).float().mean()) > 0.2
    assert float((lengths < 1.5).float().mean()) > 0.2


def _gaussian_flow(data_scale: torch.Tensor):
    """A 2-slice EGNOFlow whose denoiser is the exact posterior mean for windows X¹ = x₀ + s_p·δ, δ centred standard
    noise: in the centred subspace y = X^τ − x₀ = (1 − τ)σ_p ε + τ s_p δ, so E[X¹ | X^τ] = x₀ + τs²y / ((1 − τ)²σ² + τ²s²)."""
    model = EGNOFlow(node_features=1, edge_features=2, hidden=8, num_layers=1, num_timesteps=2, num_modes=2,
                     prior_scale=[0.5, 1.0]).double()
    sigma, s = model.prior_scale.double().view(1, -1, 1), data_scale.view(1, -1, 1)

    def exact_denoiser(inputs, window, tau):
        t = tau[inputs.batch].view(-1, 1, 1)
        y = window - inputs.x.unsqueeze(1)
        return inputs.x.unsqueeze(1) + t * s**2 * y / ((1 - t) ** 2 * sigma**2 + t**2 * s**2)

    model.denoise = exact_denoiser
    return model


def test_the_stochastic_sampler_keeps_the_flows_distribution():
    """With the exact denoiser of a Gaussian window distribution, the ODE (η = 0) and the SDE (η = 1, 2) both draw
    windows whose spread per slice is the data's s_p (centred over 3 atoms: s_p²·(1 − 1/3) per coordinate); a sign or
    a factor wrong in the SDE's drift or noise would shrink or inflate it."""
    scale = torch.tensor([0.2, 0.7], dtype=torch.float64)
    model = _gaussian_flow(scale)
    graphs = random_graphs(sizes=(3,) * 1500, seed=1)
    batch = Batch.from_data_list(graphs)
    expected = scale**2 * (1 - 1 / 3)
    for eta in (0.0, 1.0, 2.0):
        window = model.sample(batch, torch.Generator().manual_seed(3), steps=200, noise=eta)
        spread = (window - batch.X.unsqueeze(1)).pow(2).mean(dim=(0, 2))  # [P] per coordinate
        torch.testing.assert_close(spread, expected, rtol=0.06, atol=0)


def test_the_stochastic_sampler_repeats_with_its_seed_and_never_moves_a_centroid():
    """A seeded SDE sample repeats and differs from the ODE's; the SDE's own part of a step (drift and noise) is
    centred per graph and slice, so it moves no molecule as a whole."""
    from geomol.models.dynamics import dynamics_inputs
    from geomol.nn.scatter import scatter_mean

    model, batch = _model(3), Batch.from_data_list(random_graphs())
    model.sampling_noise = 1.0
    first = model.sample(batch, torch.Generator().manual_seed(5))
    assert torch.equal(first, model.sample(batch, torch.Generator().manual_seed(5)))
    assert not torch.allclose(first, model.sample(batch, torch.Generator().manual_seed(5), noise=0.0))
    inputs = dynamics_inputs(batch)
    window = model.prior(inputs, torch.Generator().manual_seed(1))
    clean = window + 0.3  # a denoiser output whose centroid is off the path's
    step = model._noise_step(inputs, window, clean, 0.4, 0.1, 1.0, torch.Generator().manual_seed(2))
    assert step.abs().max() > 1e-3
    centroid = scatter_mean(step.reshape(step.size(0), -1), batch.batch, batch.num_graphs)
    torch.testing.assert_close(centroid, torch.zeros_like(centroid), atol=1e-12, rtol=0)
