"""A generative EGNO: samples the next window of a trajectory by conditional flow matching.

A deterministic trajectory model trained on the squared error predicts the mean of the futures that one state
can have; for a molecule at 500 K over a picosecond that mean is an average of conformations, not a
conformation, and rolled out window after window it collapses. :class:`EGNOFlow` instead learns the distribution
of the window's P frames given the state and draws one future from it, so each window is a physically valid
continuation and a long rollout samples the molecule's ensemble (the idea of GeoTDM, with EGNO as the backbone).

Flow matching (Lipman et al. 2023) with an equivariant prior. For a state (x₀ [N, 3], v [N, 3]) and the true
window X¹ [N, P, 3]:

* prior: Z_p = x₀ + σ_p ε_p, ε ~ N(0, I) with each graph's mean over atoms removed (isotropic, so the model's
  distribution is E(3)-equivariant; its centroid stays with the state's). σ_p (Å) is the spread of the true
  displacement at slice p (``prior_scale``, measured on the training data);
* path: X^τ = (1 − τ) Z + τ X¹, τ ∈ [0, 1]; velocity u = X¹ − Z;
* the network predicts the clean window X̂¹(X^τ, τ, x₀, v) (positions, as EGNO does), so that its velocity is
  û = (X̂¹ − X^τ) / (1 − τ); the loss is the velocity error per slice in units of σ_p,
  ‖(X̂¹ − X¹) / (σ_p · max(1 − τ, τ_floor))‖², averaged over atoms, slices and xyz;
* optionally (``distance_weight`` λ > 0) the same weighted error on the edges' lengths, λ‖(d̂_ij − d_ij) / (σ_p ·
  max(1 − τ, τ_floor))‖² over the graph's edges and slices: the squared error of positions weighs a bond that is
  0.05 Å too long as little as a 0.05 Å shift of the whole molecule, while a bond's length is what a molecule must
  keep;
* sampling: Euler steps of the ODE dX/dτ = û from τ = 0 to 1 (``sampling_steps``); the last step lands on X̂¹.
  A ``torch.Generator`` makes a sample repeat;
* or (``sampling_noise`` η > 0) Euler–Maruyama steps of an SDE with the same marginal distributions as the ODE:
  given X^τ the true window's posterior is that of a Gaussian path, X^τ ~ N((1 − τ)x₀ + τX¹, (1 − τ)²σ_p²), so the
  score is −ε̂ / ((1 − τ)σ_p), ε̂ = (X^τ − (1 − τ)x₀ − τX̂¹) / ((1 − τ)σ_p) (centred), and for any ε(τ) ≥ 0
  dX = (û + ε·score) dτ + √(2ε) dW keeps the ODE's marginals. With ε = η(1 − τ)σ_p² a step is
  X ← X + Δτ(û − ησ_p ε̂) + σ_p √(2ηΔτ(1 − τ)) ξ, ξ centred standard noise. The injected noise, removed again by the
  score term, lets a sample correct the errors that the network's X̂¹ made at earlier steps instead of carrying
  them to τ = 1 (η = 0 is the ODE; the noise fades as τ → 1; the last step still lands on X̂¹).

The backbone is EGNO's: the state and the window share the time axis as P + 2 slices — the previous frame
x₀ − s·v (s = ``velocity_span`` frames), the state x₀, then the P noisy frames — each with its slice embedding and
a flow-time embedding (τ = 1 for the two clean slices); each layer applies EGNO's temporal Fourier convolutions
along that axis and an EGNN layer on every slice, the velocity v as its vector input. Distances in the state enter
every edge as a feature. So a noisy frame learns from the clean ones what the molecule is doing. EGNO's vector
convolution adds to each slice a fixed linear mix of all slices' centred positions, which also rescales the slice's
own geometry; the right mix depends on how noisy the slice is (pull a pure-noise frame towards the state, leave an
almost clean one alone), so here its update is gated per node and slice by an invariant of h, which carries τ:
x ← x + g(h)·Δx, g = Linear(h) (initialised to 1, EGNO's update).

Shapes: N atoms (all graphs of a batch), M directed edges, P frames, H hidden channels, S = P + 2 slices.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from geomol.errors import ConfigError
from geomol.models.dynamics import NodeAttrNorm, TrajectoryPrediction, dynamics_inputs
from geomol.nn.egnn import EGNNLayer, in_degree
from geomol.nn.scatter import scatter_mean
from geomol.nn.temporal import ScalarTimeConv, VectorTimeConv, timestep_embedding

__all__ = ["EGNOFlow", "centred_noise"]

CLEAN_SLICES = 2  # the previous frame and the state


def centred_noise(shape: Sequence[int], batch: torch.Tensor, num_graphs: int, generator=None, dtype=None,
                  device=None) -> torch.Tensor:
    """[N, P, 3] standard normal noise with each graph's mean over its atoms removed (per slice)."""
    return _centred(torch.randn(*shape, generator=generator, dtype=dtype, device=device), batch, num_graphs)


def _centred(x: torch.Tensor, batch: torch.Tensor, num_graphs: int) -> torch.Tensor:
    """[N, ...] ``x`` with each graph's mean over its atoms removed (per slice and coordinate)."""
    flat = x.reshape(x.size(0), -1)
    return (flat - scatter_mean(flat, batch, num_graphs)[batch]).view_as(x)


def _flow_time_embedding(tau: torch.Tensor, dim: int) -> torch.Tensor:
    """[..., dim] sinusoidal embedding of flow times τ ∈ [0, 1] (scaled by 1000, as diffusion models do)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=tau.dtype, device=tau.device) / max(half - 1, 1))
    angles = 1000.0 * tau.unsqueeze(-1) * freqs
    return torch.cat([torch.sin(angles), torch.cos(angles)], -1)


class EGNOFlow(nn.Module):
    """Conditional flow-matching EGNO (module docstring).

    Args:
        node_features: F, invariant node features including |v| (as :func:`dynamics_inputs` builds them).
        edge_features: E, edge features including the squared distance in the state.
        hidden: H. num_layers: L. num_timesteps: P frames per window. num_modes: temporal Fourier modes.
        time_embedding_dim: width of the slice and flow-time embeddings.
        prior_scale: [P] σ_p in the data's length unit (one value: the same for every slice; None: 1, to be set
            from the training data or loaded with the weights, where it is a buffer).
        velocity_span: s, frames between the two frames whose difference is the velocity (the previous slice is
            x₀ − s·v).
        sampling_steps: Euler steps of a sample. sampling_noise: η of the stochastic sampler (module docstring;
            0: the flow's ODE). tau_floor: smallest 1 − τ in the loss weight.
        distance_weight: λ of the edge-length term of the loss (0: positions only).
        grid_power: γ of the sampling time grid (:meth:`time_grid`; 1: even steps).
        tau_power: training draws τ = 1 − (1 − u)^κ, u ~ U(0, 1) (κ > 1 trains the nearly clean end of the flow, where
            bond lengths are decided, more often; 1: uniform).
        node_attr_norm: see :func:`~geomol.models.dynamics.dynamics_inputs`.
    """

    generative = True

    def __init__(self, node_features: int = 2, edge_features: int = 2, hidden: int = 64, num_layers: int = 4,
                 num_timesteps: int = 8, num_modes: int = 3, time_embedding_dim: int = 32,
                 prior_scale: float | Sequence[float] | None = None, velocity_span: float = 1.0, sampling_steps: int = 10,
                 tau_floor: float = 0.05, distance_weight: float = 0.0, grid_power: float = 1.0,
                 tau_power: float = 1.0, node_attr_norm: NodeAttrNorm = "dataset", sampling_noise: float = 0.0):
        super().__init__()
        slices = num_timesteps + CLEAN_SLICES
        if num_timesteps < 1 or num_layers < 1 or hidden < 1 or sampling_steps < 1:
            raise ConfigError("num_timesteps, num_layers, hidden and sampling_steps must be ≥ 1")
        if not sampling_noise >= 0:
            raise ConfigError(f"sampling_noise must be ≥ 0, got {sampling_noise}")
        if num_modes > slices // 2 + 1:
            raise ConfigError(f"num_modes={num_modes} exceeds the {slices // 2 + 1} Fourier bins of {slices} slices")
        prior_scale = 1.0 if prior_scale is None else prior_scale
        scale = [float(prior_scale)] * num_timesteps if isinstance(prior_scale, (int, float)) else list(prior_scale)
        if len(scale) != num_timesteps or min(scale) <= 0:
            raise ConfigError(f"prior_scale needs {num_timesteps} positive values, got {scale}")
        self.node_features, self.edge_features, self.hidden = node_features, edge_features, hidden
        self.num_timesteps, self.num_modes, self.time_embedding_dim = num_timesteps, num_modes, time_embedding_dim
        self.velocity_span, self.sampling_steps, self.tau_floor = float(velocity_span), sampling_steps, tau_floor
        self.sampling_noise = float(sampling_noise)
        self.distance_weight, self.grid_power, self.tau_power = float(distance_weight), float(grid_power), float(tau_power)
        self.node_attr_norm = node_attr_norm
        self.register_buffer("prior_scale", torch.tensor(scale, dtype=torch.float32))
        self.embedding = nn.Linear(node_features + 2 * time_embedding_dim, hidden)
        self.layers = nn.ModuleList(EGNNLayer(hidden, edge_features) for _ in range(num_layers))
        self.time_convs = nn.ModuleList(ScalarTimeConv(hidden, num_modes) for _ in range(num_layers))
        self.vector_convs = nn.ModuleList(VectorTimeConv(num_modes) for _ in range(num_layers))
        self.vector_gates = nn.ModuleList(nn.Linear(hidden, 2) for _ in range(num_layers))  # positions, velocities
        for gate in self.vector_gates:
            nn.init.zeros_(gate.weight)
            nn.init.ones_(gate.bias)

    # ------------------------------------------------------------------ the network
    def denoise(self, inputs, window: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """X̂¹ [N, P, 3]: the clean window predicted from the noisy one.

        Args:
            inputs: :class:`~geomol.models.dynamics.DynamicsInputs` of the state.
            window: [N, P, 3] X^τ. tau: [B] flow time of each graph.
        """
        P, S = self.num_timesteps, self.num_timesteps + CLEAN_SLICES
        x0, v = inputs.x, inputs.v
        x = torch.cat([(x0 - self.velocity_span * v).unsqueeze(1), x0.unsqueeze(1), window], 1)  # [N, S, 3]
        node_tau = tau[inputs.batch]
        slice_tau = torch.cat([torch.ones_like(node_tau).unsqueeze(1).expand(-1, CLEAN_SLICES),
                               node_tau.unsqueeze(1).expand(-1, P)], 1)  # [N, S]
        d = self.time_embedding_dim
        slice_emb = timestep_embedding(S, d, dtype=x0.dtype, device=x0.device)  # [S, d]
        features = torch.cat([inputs.h.unsqueeze(1).expand(-1, S, -1), slice_emb.unsqueeze(0).expand(x.size(0), -1, -1),
                              _flow_time_embedding(slice_tau, d)], -1)
        h = self.embedding(features)  # [N, S, H]
        velocity = v.unsqueeze(1).expand(-1, S, -1)
        center = inputs.center.unsqueeze(1)
        degree = in_degree(inputs.edge_index[0], x.size(0), x.dtype)
        for time_conv, vector_conv, gate, layer in zip(self.time_convs, self.vector_convs, self.vector_gates,
                                                       self.layers):
            h = time_conv(h)
            mixed_x, mixed_v = vector_conv(x, velocity, center)
            g = gate(h)  # [N, S, 2] invariant
            x, velocity = x + g[..., :1] * (mixed_x - x), velocity + g[..., 1:] * (mixed_v - velocity)
            x, h = layer(x, h, velocity, inputs.edge_index, inputs.edge_attr, degree)
        return x[:, CLEAN_SLICES:]

    def _scale(self, like: torch.Tensor) -> torch.Tensor:
        return self.prior_scale.to(like).view(1, -1, 1)

    def prior(self, inputs, generator=None) -> torch.Tensor:
        """[N, P, 3] a draw Z of the prior around the state."""
        noise = centred_noise((inputs.x.size(0), self.num_timesteps, 3), inputs.batch, inputs.num_graphs,
                              generator=generator, dtype=inputs.x.dtype, device=inputs.x.device)
        return inputs.x.unsqueeze(1) + self._scale(inputs.x) * noise

    # ------------------------------------------------------------------ training
    def loss(self, graph, generator=None) -> torch.Tensor:
        """Flow-matching loss of a batch with targets ``X_target`` [N, P, 3] (module docstring)."""
        inputs = dynamics_inputs(graph, self.node_attr_norm)
        self._check(inputs)
        target = graph.X_target.to(inputs.x.dtype)
        u = torch.rand(inputs.num_graphs, generator=generator, dtype=target.dtype, device=target.device)
        tau = 1 - (1 - u) ** self.tau_power
        z = self.prior(inputs, generator)
        t = tau[inputs.batch].view(-1, 1, 1)
        predicted = self.denoise(inputs, (1 - t) * z + t * target, tau)
        weight = 1.0 / (self._scale(target) * (1 - t).clamp(min=self.tau_floor))  # [N, P, 1]
        loss = ((predicted - target) * weight).pow(2).mean()
        if self.distance_weight:
            row, col = inputs.edge_index
            length = lambda x: (x[row] - x[col]).norm(dim=-1, keepdim=True)  # noqa: E731  [M, P, 1]
            loss = loss + self.distance_weight * ((length(predicted) - length(target)) * weight[row]).pow(2).mean()
        return loss

    # ------------------------------------------------------------------ sampling
    def sample(self, graph, generator=None, steps: int | None = None, prior: torch.Tensor | None = None,
               noise: float | None = None) -> torch.Tensor:
        """[N, P, 3] one window drawn for each state of the batch (the flow integrated from τ = 0 to 1).

        ``prior``: the start Z of the integration [N, P, 3] instead of a draw from ``generator`` (with η = 0 the
        sample is then a deterministic, E(3)-equivariant function of the state and Z). ``steps``, ``noise``: the
        number of steps and η instead of ``sampling_steps`` and ``sampling_noise``.
        """
        inputs = dynamics_inputs(graph, self.node_attr_norm)
        self._check(inputs)
        steps = steps or self.sampling_steps
        eta = self.sampling_noise if noise is None else float(noise)
        window = self.prior(inputs, generator) if prior is None else prior.to(inputs.x)
        grid = self.time_grid(steps)
        for begin, end in zip(grid[:-1], grid[1:]):
            tau = torch.full((inputs.num_graphs,), begin, dtype=window.dtype, device=window.device)
            clean = self.denoise(inputs, window, tau)
            step = (clean - window) * ((end - begin) / (1 - begin))  # Δτ · û, û = (X̂¹ − X^τ) / (1 − τ)
            if eta > 0 and end < 1:
                step = step + self._noise_step(inputs, window, clean, begin, end - begin, eta, generator)
            window = window + step
        return window

    def _noise_step(self, inputs, window: torch.Tensor, clean: torch.Tensor, tau: float, dtau: float, eta: float,
                    generator) -> torch.Tensor:
        """[N, P, 3] the SDE's part of a step: −Δτ·η·σ_p·ε̂ + σ_p·√(2ηΔτ(1 − τ))·ξ (module docstring)."""
        sigma = self._scale(window)
        residual = _centred(window - (1 - tau) * inputs.x.unsqueeze(1) - tau * clean, inputs.batch, inputs.num_graphs)
        epsilon = residual / ((1 - tau) * sigma)
        xi = centred_noise(window.shape, inputs.batch, inputs.num_graphs, generator=generator, dtype=window.dtype,
                           device=window.device)
        return sigma * (math.sqrt(2 * eta * dtau * (1 - tau)) * xi - dtau * eta * epsilon)

    def time_grid(self, steps: int) -> list[float]:
        """Flow times 0 = τ_0 < … < τ_K = 1 of the Euler steps: τ_k = 1 − (1 − k/K)^γ (``grid_power`` γ ≥ 1 puts
        more steps near τ = 1, where the window's fine structure, its bond lengths, is decided)."""
        return [1.0 - (1.0 - k / steps) ** self.grid_power for k in range(steps + 1)]

    def forward(self, graph, generator=None) -> TrajectoryPrediction:
        """One sampled window as a :class:`~geomol.models.dynamics.TrajectoryPrediction` (x [N, P, 3]; v: the
        input velocity; h: empty)."""
        x = self.sample(graph, generator)
        v = graph.V.to(x.dtype).unsqueeze(1).expand_as(x)
        return TrajectoryPrediction(x, v, x.new_zeros(x.size(0), x.size(1), 0))

    def _check(self, inputs) -> None:
        if inputs.h.size(-1) != self.node_features or inputs.edge_attr.size(-1) != self.edge_features:
            raise ConfigError(f"batch has {inputs.h.size(-1)} node and {inputs.edge_attr.size(-1)} edge features "
                              f"(|v| and d² included), the model expects {self.node_features} and "
                              f"{self.edge_features}")
