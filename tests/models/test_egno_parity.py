"""EGNO reproduces the official function: official parameter layout, hand re-computation of the spec.

The reference below is written from ``specs/EGNO.md`` §1–§2 in the official flattened layout
(row t·BN + n, the edge list replicated P times, explicit DFT sums, the message MLP on the
concatenation [s, h_i, h_j, e]), in float64, and fed the official-layout state_dict directly.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from geomol.errors import ModelLoadError
from geomol.models.egno import EGNO, load_official_state_dict

NBODY = dict(L=4, H=64, F=1, E=2, P=5, K=2, Dt=32)


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
    freqs = torch.exp(-torch.arange(half, dtype=torch.float64) * math.log(10000) / (half - 1))
    ang = torch.arange(P, dtype=torch.float64)[:, None] * freqs
    emb = torch.cat([ang.sin(), ang.cos()] + ([torch.zeros(P, 1, dtype=torch.float64)] if Dt % 2 else []), -1)
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


def tiny_batch(F_, E, seed=1):
    """Two complete graphs of 5 and 4 nodes (different sizes), float32."""
    gen = torch.Generator().manual_seed(seed)
    sizes, rows, cols, start = (5, 4), [], [], 0
    for n in sizes:
        for i in range(n):
            for j in range(n):
                if i != j:
                    rows.append(start + i), cols.append(start + j)
        start += n
    bn = sum(sizes)
    batch = torch.repeat_interleave(torch.arange(2), torch.tensor(sizes))
    x = torch.randn(bn, 3, generator=gen)
    centroids = torch.zeros(2, 3).index_add_(0, batch, x) / torch.tensor(sizes)[:, None]
    edge_index = torch.tensor([rows, cols])
    return (x, torch.rand(bn, F_, generator=gen), edge_index, torch.randn(len(rows), E, generator=gen),
            torch.randn(bn, 3, generator=gen), centroids[batch])


def test_official_layout_counts():
    sd = official_layout(**NBODY)
    assert len(sd) == 74 and sum(t.numel() for t in sd.values()) == 201_672
    assert sum(t.numel() for t in EGNO(1, 2, 64, 4, 5, 2, 32).parameters()) == 201_672
    mocap = EGNO(2, 2, 128, 6, 5, 2, 32)
    assert len(mocap.state_dict()) == 110 and sum(t.numel() for t in mocap.parameters()) == 1_192_684
    md17 = EGNO(2, 5, 64, 5, 8, 2, 32, use_time_conv=False)
    assert len(md17.state_dict()) == 82 and sum(t.numel() for t in md17.parameters()) == 170_570


@pytest.mark.parametrize("config", [NBODY, dict(L=2, H=16, F=2, E=3, P=4, K=3, Dt=31)])
def test_parity_with_spec_recomputation(config):
    sd = official_layout(**config)
    model = EGNO(config["F"], config["E"], config["H"], config["L"], config["P"], config["K"], config["Dt"])
    load_official_state_dict(model, sd)
    inputs = tiny_batch(config["F"], config["E"])
    with torch.no_grad():
        pred = model.forward_tensors(*inputs)
    x, h, edge_index, edge_fea, v, loc_mean = inputs
    ref_x, ref_v, ref_h = spec_egno(sd, config["L"], config["H"], config["P"], config["K"], config["Dt"],
                                    x, h, edge_index, edge_fea, v, loc_mean)
    P = config["P"]
    for ours, ref in ((pred.x, ref_x), (pred.v, ref_v), (pred.h, ref_h)):
        flat = ours.transpose(0, 1).reshape(P * x.size(0), -1).double()  # node-major → official t·BN + n
        rel = ((flat - ref).norm() / ref.norm()).item()
        assert rel < 1e-5, rel


def test_load_rejects_mismatched_state_dicts():
    sd = official_layout(**NBODY)
    with pytest.raises(ModelLoadError, match="shape"):
        load_official_state_dict(EGNO(1, 2, 32, 4, 5), sd)
    with pytest.raises(ModelLoadError, match="missing"):
        load_official_state_dict(EGNO(1, 2, 64, 4, 5), {k: t for k, t in sd.items() if "time_conv_x" not in k})
    with pytest.raises(ModelLoadError, match="unknown"):
        load_official_state_dict(EGNO(1, 2, 64, 4, 5, use_time_conv=False), sd)
    load_official_state_dict(EGNO(1, 2, 64, 4, 5), {f"module.{k}": t for k, t in sd.items()})
