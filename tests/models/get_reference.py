"""A direct, loop-by-loop re-computation of the official GET core from ``specs/GET.md``.

Written for clarity, not speed: it walks groups, pairs and heads one by one with the spec's
formulas and the official parameter names (§4–§8), so that the fast implementation in
``geomol`` can be checked against it on tiny complexes. Everything runs in float64.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

D, R, C, RBF, HEADS, DE, LAYERS = 64, 32, 1, 32, 4, 64, 3  # the LBA configuration


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread in the GET tests (import it into a test module to use it): on a
    shared 2-core machine two OpenMP threads mostly wait for each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
DH, RH, RBFH = D // HEADS, R // HEADS, RBF // HEADS


def official_core_shapes(d=D, r=R, c=C, n_rbf=RBF, h=HEADS, de=DE, layers=LAYERS):
    """Appendix K: official key → shape, in state_dict order."""
    dh, rh, rbfh = d // h, r // h, n_rbf // h
    mlp = lambda name, i, o, m=None: [(f"{name}.0.weight", (m or o, i)), (f"{name}.0.bias", (m or o,)),
                                      (f"{name}.2.weight", (o, m or o)), (f"{name}.2.bias", (o,))]
    layer = ([("linear_qk.weight", (2 * rh, dh)), ("linear_v.weight", (rh, dh)), ("linear_v.bias", (rh,)),
              ("rbf.rbf.offset", (n_rbf,))] + mlp("att_mlp", 3 * rh + c * rbfh, rh)
             + [("unit_att_linear.weight", (1, rh)), ("unit_att_linear.bias", (1,)),
                ("block_att_linear.weight", (1, rh)), ("block_att_linear.bias", (1,)),
                ("edge_linear.weight", (r, de)), ("edge_linear.bias", (r,))]
             + mlp("node_mlp", r, d) + [("node_out_linear.weight", (d, d)), ("node_out_linear.bias", (d,))]
             + mlp("coord_mlp", r, h * c, d) + mlp("unit_msg_mlp", rh + c * rbfh, rh)
             + mlp("unit_msg_coord_mlp", rh + c * rbfh, rh)
             + [("unit_msg_coord_linear.weight", (c, rh)), ("unit_msg_coord_linear.bias", (c,))])
    norm = [("sigma", (1, c, 1))] + mlp("fuse_scale_ffn", c * n_rbf, d) + \
        [("layernorm.weight", (d,)), ("layernorm.bias", (d,)), ("rbf.rbf.offset", (n_rbf,))]
    ffn = []
    for name, out in (("mlp_h", d), ("mlp_z", c)):
        ffn += [(f"{name}.0.weight", (4 * d, 2 * d + c * n_rbf)), (f"{name}.0.bias", (4 * d,)),
                (f"{name}.3.weight", (4 * d, 4 * d)), (f"{name}.3.bias", (4 * d,)),
                (f"{name}.6.weight", (out, 4 * d)), (f"{name}.6.bias", (out,))]
    ffn.append(("rbf.rbf.offset", (n_rbf,)))
    shapes = {}
    for i in range(layers):
        for prefix, keys in ((f"layer_{i}.", layer), (f"layernorm0_{i}.", norm), (f"ffn_{i}.", ffn),
                             (f"layernorm1_{i}.", norm)):
            shapes.update({prefix + k: s for k, s in keys})
    return shapes


def random_official_core(seed: int, **config) -> dict[str, torch.Tensor]:
    """Seeded float32 tensors with exactly the official keys and shapes (PyTorch-like scales)."""
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in official_core_shapes(**config).items():
        if key.endswith("offset"):
            state[key] = torch.linspace(0, 1, shape[0])
        elif key.endswith("sigma"):
            state[key] = 1 + 0.2 * torch.rand(shape, generator=gen)
        elif key.startswith("layernorm") and "layernorm." in key:
            state[key] = (1.0 if key.endswith("weight") else 0.0) + 0.1 * torch.randn(shape, generator=gen)
        else:
            fan_in = shape[-1] if len(shape) > 1 else shape[0]
            state[key] = (torch.rand(shape, generator=gen) * 2 - 1) / math.sqrt(fan_in)
    return state


# ---------------------------------------------------------------------- primitives (§2)
def rbf(d: torch.Tensor, n: int, cutoff: float) -> torch.Tensor:
    """[..., n]: polynomial envelope (p = 5) times Gaussians centred at linspace(0, 1, n)."""
    offset = torch.linspace(0, 1, n, dtype=torch.float32)
    gamma = -0.5 / float(offset[1] - offset[0]) ** 2
    x = d * (1.0 / cutoff)
    env = torch.where(x < 1, 1 - 21 * x ** 5 + 35 * x ** 6 - 15 * x ** 7, torch.zeros_like(x))
    return env.unsqueeze(-1) * torch.exp(gamma * (x.unsqueeze(-1) - offset.to(d.dtype)) ** 2)


def linear(sd, name, x):
    return x @ sd[name + ".weight"].T + (sd[name + ".bias"] if name + ".bias" in sd else 0)


def mlp2(sd, name, x):
    return F.silu(linear(sd, name + ".2", F.silu(linear(sd, name + ".0", x))))


# ---------------------------------------------------------------------- atom pairs (§4)
def atom_pairs(Z, block_id, edges, k):
    """List of groups (i, e, [j nearest first]) in enumeration order."""
    groups = []
    for e in range(edges.size(1)):
        I, J = int(edges[0, e]), int(edges[1, e])
        atoms_i = (block_id == I).nonzero().flatten().tolist()
        atoms_j = (block_id == J).nonzero().flatten()
        for i in atoms_i:
            dist = torch.linalg.vector_norm(Z[i] - Z[atoms_j], dim=-1).sum(-1)
            order = torch.argsort(dist)[:k]
            groups.append((i, e, atoms_j[order].tolist()))
    return groups


# ---------------------------------------------------------------------- GETLayer (§3, §5)
def get_layer(sd, p, H, Z, groups, edges, edge_attr, cutoff=7.0, h=HEADS):
    N, d = H.shape
    dh, rh = d // h, sd[p + "linear_v.weight"].shape[0]
    n_rbf = sd[p + "rbf.rbf.offset"].numel()
    rbfh, C_ = n_rbf // h, Z.shape[1]
    eps = linear(sd, p + "edge_linear", edge_attr)  # [E, r]
    n_edges = edges.size(1)
    new_H, new_Z = H.clone(), Z.clone()
    G = torch.zeros(N, d, dtype=H.dtype)
    dZ = torch.zeros_like(Z)
    # per head: r_ij, m_ij, mu_ij for every pair of every group
    per_group = []  # (i, e, js, [per head dicts])
    for i, e, js in groups:
        heads = []
        for t in range(h):
            Hi, Hj = H[i, t * dh:(t + 1) * dh], H[js, t * dh:(t + 1) * dh]
            q = (sd[p + "linear_qk.weight"] @ Hi)[0::2]
            kk = (Hj @ sd[p + "linear_qk.weight"].T)[:, 1::2]
            v = linear(sd, p + "linear_v", Hj)
            x = Z[i] - Z[js]  # [n, C, 3]
            radial = rbf(torch.linalg.vector_norm(x, dim=-1), n_rbf, cutoff)  # [n, C, R]
            rho = radial[:, :, t * rbfh:(t + 1) * rbfh].reshape(len(js), C_ * rbfh)
            e_t = eps[e, t * rh:(t + 1) * rh]
            att_in = torch.cat([q.expand(len(js), -1), kk, rho, e_t.expand(len(js), -1)], 1)
            r_ij = mlp2(sd, p + "att_mlp", att_in)
            s = linear(sd, p + "unit_att_linear", r_ij).squeeze(-1)
            alpha = torch.softmax(s, 0)
            m = mlp2(sd, p + "unit_msg_mlp", torch.cat([v, rho], 1))
            mu = mlp2(sd, p + "unit_msg_coord_mlp", torch.cat([v, rho], 1))
            w = alpha.unsqueeze(-1) * linear(sd, p + "unit_msg_coord_linear", mu)  # [n, C]
            heads.append(dict(r=r_ij, alpha=alpha, A=(alpha.unsqueeze(-1) * m).sum(0),
                              Amu=(alpha.unsqueeze(-1) * mu).sum(0), X=(w.unsqueeze(-1) * x).sum(0)))
        per_group.append((i, e, js, heads))
    # block-level logits and softmax
    tau = torch.zeros(n_edges, h, dtype=H.dtype)
    for e in range(n_edges):
        for t in range(h):
            rs = torch.cat([hd[t]["r"] for (_, ge, _, hd) in per_group if ge == e])
            tau[e, t] = linear(sd, p + "block_att_linear", rs.mean(0))[0]
    beta = torch.zeros_like(tau)
    for e in range(n_edges):
        same = edges[0] == edges[0, e]
        beta[e] = torch.exp(tau[e]) / torch.exp(tau[same]).sum(0)
    for i, e, js, heads in per_group:
        U = mlp2(sd, p + "node_mlp", torch.cat([hd["A"] for hd in heads]))
        kappa = mlp2(sd, p + "coord_mlp", torch.cat([hd["Amu"] for hd in heads])).view(h, C_)
        for t in range(h):
            G[i, t * dh:(t + 1) * dh] += beta[e, t] * U[t * dh:(t + 1) * dh]
            dZ[i] += beta[e, t] * kappa[t].unsqueeze(-1) * heads[t]["X"]
    new_H = H + linear(sd, p + "node_out_linear", G)
    return new_H, Z + dZ


# ---------------------------------------------------------------------- norm, FFN (§6, §7)
def layer_norm(sd, p, H, Z, atom_graph, n_graphs, cutoff=7.0):
    n_rbf = sd[p + "rbf.rbf.offset"].numel()
    Z, H = Z.clone(), H.clone()
    rescale = torch.zeros(n_graphs, Z.shape[1], 1, dtype=Z.dtype)
    for g in range(n_graphs):
        sel = atom_graph == g
        centre = Z[sel].mean(0)
        Y = Z[sel] - centre
        for c in range(Z.shape[1]):
            std = Y[:, c].flatten().std(unbiased=True)
            rescale[g, c, 0] = sd[p + "sigma"][0, c, 0] / std
        Z[sel] = centre + Y * rescale[g]
        feat = rbf(rescale[g, :, 0], n_rbf, cutoff).flatten()
        H[sel] = H[sel] + mlp2(sd, p + "fuse_scale_ffn", feat)
    H = F.layer_norm(H, (H.shape[1],), sd[p + "layernorm.weight"], sd[p + "layernorm.bias"], 1e-5)
    return H, Z, rescale


def ffn(sd, p, H, Z, block_id):
    n_rbf = sd[p + "rbf.rbf.offset"].numel()
    H_new, Z_new = H.clone(), Z.clone()
    for b in block_id.unique().tolist():
        sel = block_id == b
        centre = Z[sel].mean(0)
        O = Z[sel] - centre
        radial = rbf(torch.linalg.vector_norm(O, dim=-1), n_rbf, 7.0).flatten(1)
        inp = torch.cat([H[sel], H[sel].mean(0).expand(int(sel.sum()), -1), radial], 1)
        out = {}
        for name in ("mlp_h", "mlp_z"):
            hid = F.silu(linear(sd, p + name + ".3", F.silu(linear(sd, p + name + ".0", inp))))
            out[name] = linear(sd, p + name + ".6", hid)
        H_new[sel] = H[sel] + out["mlp_h"]
        Z_new[sel] = centre + out["mlp_z"].unsqueeze(-1) * O
    return H_new, Z_new


def get_core(sd, H, Z, block_id, batch_id, edges, edge_attr, k=3, layers=LAYERS):
    """The official ``GET.forward`` (eval mode), float64."""
    sd = {key: v.double() for key, v in sd.items()}
    H, Z, edge_attr = H.double(), Z.double(), edge_attr.double()
    atom_graph = batch_id[block_id]
    n_graphs = int(batch_id.max()) + 1
    groups = atom_pairs(Z, block_id, edges, k)
    record = torch.ones(n_graphs, Z.shape[1], 1, dtype=Z.dtype)
    for i in range(layers):
        H, Z = get_layer(sd, f"layer_{i}.", H, Z, groups, edges, edge_attr)
        H, Z, s = layer_norm(sd, f"layernorm0_{i}.", H, Z, atom_graph, n_graphs)
        record = record * s
        H, Z = ffn(sd, f"ffn_{i}.", H, Z, block_id)
        H, Z, s = layer_norm(sd, f"layernorm1_{i}.", H, Z, atom_graph, n_graphs)
        record = record * s
    for g in range(n_graphs):
        sel = atom_graph == g
        centre = Z[sel].mean(0)
        Z[sel] = centre + (Z[sel] - centre) / record[g]
    return H, Z
