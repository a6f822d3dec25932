"""The official EGNO written from ``specs/EGNO.md`` §1–§2, for parity tests (no official code imported).

:func:`official_layout` builds a state_dict with the official keys and shapes (Appendix A);
:func:`spec_egno` evaluates ``EGNO.forward`` from it by hand in the official flattened layout
(row t·BN + n, the edge list replicated P times, explicit DFT sums, the message MLP on the
concatenation [s, h_i, h_j, e]), in float64 and differentiably, so that a test can also train it.
"""
import math

import torch
import torch.nn.functional as F


def official_layout(L, H, F, E, P, K, Dt, seed=0):
    """A seeded random state_dict with the official keys and shapes (Appendix A), in state_dict order."""
    gen = torch.Generator().manual_seed(seed)
    sd = {}

    def linear(name, n_out, n_in):
        bound = 1 / math.sqrt(n_in)
        sd[f"{name}.weight"] = (torch.rand(n_out, n_in, generator=gen) * 2 - 1) * bound
        sd[f"{name}.bias"] = (torch.rand(n_out, generator=gen) * 2 - 1) * bound

    for i in range(L):
        linear(f"layers.{i}.edge_message_net.scalar_net.mlp.0", H, 1 + 2 * H + E)
        linear(f"layers.{i}.edge_message_net.scalar_net.mlp.2", H, H)
        linear(f"layers.{i}.coord_net.mlp.0", H, H)
        linear(f"layers.{i}.coord_net.mlp.2", 1, H)
        linear(f"layers.{i}.node_v_net.mlp.0", H, H)
        linear(f"layers.{i}.node_v_net.mlp.2", 1, H)
        linear(f"layers.{i}.node_net.mlp.0", H, 2 * H)
        linear(f"layers.{i}.node_net.mlp.2", H, H)
    linear("embedding", H, F + Dt)
    for i in range(L):  # signed spectral weights, so that every mode and sign is exercised
        sd[f"time_conv_modules.{i}.t_conv.weights1"] = torch.randn(H, H, K, 2, generator=gen) / H
    for i in range(L):
        sd[f"time_conv_x_modules.{i}.t_conv.weights1"] = 0.1 * torch.randn(2, 2, K, 2, generator=gen)
    return sd


def spec_egno(sd, L, H, P, K, Dt, x, h, edge_index, edge_fea, v, loc_mean):
    """EGNO.forward by hand, float64, official flattened layout; returns x, v, h as [P·BN, ·]."""
    sd = {k: t.double() for k, t in sd.items()}
    lin = lambda name, a: a @ sd[f"{name}.weight"].T + sd[f"{name}.bias"]
    bn, m = h.size(0), edge_index.size(1)
    half = Dt // 2
    # §1.4: frequencies and angles in float32 (c = ln(10000)/(half − 1) a Python double), then widened
    freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000) / (half - 1)))
    ang = torch.arange(P, dtype=torch.float32)[:, None] * freqs
    emb = torch.cat([ang.sin(), ang.cos()] + ([torch.zeros(P, 1)] if Dt % 2 else []), -1).double()
    hh = torch.cat([h.double().repeat(P, 1), emb.repeat_interleave(bn, 0)], -1)
    hh = lin("embedding", hh)
    xx, vv, lm = x.double().repeat(P, 1), v.double().repeat(P, 1), loc_mean.double().repeat(P, 1)
    offset = torch.arange(P).repeat_interleave(m) * bn
    row, col = edge_index[0].repeat(P) + offset, edge_index[1].repeat(P) + offset
    ee = edge_fea.double().repeat(P, 1)
    t = torch.arange(P, dtype=torch.float64)

    def dft(u, w):  # u [P, ..., C_in], w [C_in, C_out, K, 2] → explicit sums, spec §2.2
        wc = torch.complex(w[..., 0], w[..., 1])
        y = 0
        for k in range(min(K, P // 2 + 1)):
            U = torch.tensordot(torch.exp(-2j * math.pi * k * t / P), u.to(torch.complex128), dims=([0], [0]))
            Y = torch.tensordot(U, wc[:, :, k], dims=([-1], [0]))
            alpha = 1.0 if k == 0 or 2 * k == P else 2.0
            phase = torch.exp(2j * math.pi * k * t / P).view(P, *([1] * Y.dim()))
            y = y + alpha * (Y.unsqueeze(0) * phase).real
        return y / P

    for i in range(L):
        u = hh.view(P, bn, H)
        hh = (u + F.leaky_relu(dft(u, sd[f"time_conv_modules.{i}.t_conv.weights1"]), 0.01)).reshape(P * bn, H)
        z = torch.stack([xx - lm, vv], -1).view(P, bn, 3, 2)
        z = z + dft(z, sd[f"time_conv_x_modules.{i}.t_conv.weights1"])
        xx, vv = z[..., 0].reshape(-1, 3) + lm, z[..., 1].reshape(-1, 3)
        p = f"layers.{i}."
        r = xx[row] - xx[col]
        msg_in = torch.cat([r.pow(2).sum(-1, keepdim=True), hh[row], hh[col], ee], -1)
        msg = F.silu(lin(p + "edge_message_net.scalar_net.mlp.2",
                         F.silu(lin(p + "edge_message_net.scalar_net.mlp.0", msg_in))))
        wgt = lin(p + "coord_net.mlp.2", F.silu(lin(p + "coord_net.mlp.0", msg)))
        count = torch.zeros(P * bn, 1, dtype=torch.float64).index_add_(0, row, torch.ones(len(row), 1,
                                                                                          dtype=torch.float64))
        force = (torch.zeros_like(xx).index_add_(0, row, r * wgt) / count.clamp(min=1)).clamp(-100, 100)
        xx = xx + lin(p + "node_v_net.mlp.2", F.silu(lin(p + "node_v_net.mlp.0", hh))) * vv + force
        agg = torch.zeros_like(hh).index_add_(0, row, msg)
        hh = lin(p + "node_net.mlp.2", F.silu(lin(p + "node_net.mlp.0", torch.cat([hh, agg], -1))))
    return xx, vv, hh


def official_initial_state(L, H, F, E, K, Dt, seed):
    """The official EGNO's initial parameters for ``torch.manual_seed(seed)`` (spec §2.6 "Initialisation").

    Drawn in the official creation order: the embedding; then per layer the message MLP, coord_net,
    node_v_net and node_net (each Linear: weight, then bias, PyTorch's default init); then per layer
    the scalar spectral weight (U[0, 1)/(H·H)) followed by the vector one (0.1·U[0, 1)).
    """
    torch.manual_seed(seed)
    sd = {}

    def linear(name, n_in, n_out):
        layer = torch.nn.Linear(n_in, n_out)
        sd[f"{name}.weight"], sd[f"{name}.bias"] = layer.weight.detach(), layer.bias.detach()

    linear("embedding", F + Dt, H)
    for i in range(L):
        p = f"layers.{i}."
        linear(p + "edge_message_net.scalar_net.mlp.0", 1 + 2 * H + E, H)
        linear(p + "edge_message_net.scalar_net.mlp.2", H, H)
        linear(p + "coord_net.mlp.0", H, H)
        linear(p + "coord_net.mlp.2", H, 1)
        linear(p + "node_v_net.mlp.0", H, H)
        linear(p + "node_v_net.mlp.2", H, 1)
        linear(p + "node_net.mlp.0", 2 * H, H)
        linear(p + "node_net.mlp.2", H, H)
    for i in range(L):
        sd[f"time_conv_modules.{i}.t_conv.weights1"] = (1 / (H * H)) * torch.rand(H, H, K, 2)
        sd[f"time_conv_x_modules.{i}.t_conv.weights1"] = 0.1 * torch.rand(2, 2, K, 2)
    return sd
