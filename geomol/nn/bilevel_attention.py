"""GET's bilevel attention layer (``specs/GET.md`` §3 and §5).

Each atom i of a receiving block I attends, for every block edge e = (I, J), to its k nearest
atoms j of J (the pairs of :mod:`geomol.nn.atom_pairs`):

* atom level: α_ij = softmax over the pairs of group (i, e) of a logit s_ij computed by an MLP
  on [query_i, key_j, RBF(|x_ij|), edge features] (no dot product, no 1/√d);
* block level: β_e = softmax over the block edges entering I of a logit τ_e computed from the
  mean pair representation of edge e;
* H_i += W_out Σ_e β_e MLP_node(Σ_j α_ij m_ij) and Z_i += Σ_e Σ_heads β_e κ_ie Σ_j α_ij w_ij x_ij,
  with x_ij = Z_i − Z_j, so coordinates move along inter-atomic vectors (E(3)-equivariant).

Heads share all weights and differ by the slice of H, of the edge features and of the RBF
(the basis functions are partitioned across heads) they see.

Implementation. The first linear layer of each pair MLP is split by input blocks: the query,
key and value parts are applied once per atom and the edge part once per edge, so only the RBF
part is a product over pairs. The per-pair stage (the three pair MLPs, the scalar read-outs, the
softmax within each group and the α-weighted sums) runs as one compiled loop where it is available
(:mod:`geomol.nn.native`: no [pairs, heads, 3rh] tensor is formed), else in PyTorch (:func:`_pair_stage`:
the three MLPs as one block-diagonal product on the concatenated [pairs, heads, 3·r/h] state). Both give
the same function to float32 rounding. The work runs in chunks of whole receiving blocks, recomputed in
the backward pass (:mod:`geomol.nn.chunked`): memory stays flat and the chunks stay in cache. The backward
pass of a chunk is written by hand (:func:`attend_backward`: one forward recomputation without autograd,
then the chain rule). With the compiled pair stage, the block and group level (block softmax β, coordinate
coefficients, the scatter onto the receiving atoms: :mod:`geomol.nn.attend_groups`) and the two group MLPs
(:mod:`geomol.nn.group_mlp`) run compiled too, forward and backward; the forward pass keeps, per chunk, the pair
stage's outputs with the distances and receiver rows, the group MLPs' outputs and the block softmax ([g, ·], [e, ·]
and [p, C] tensors), so that the backward pass recomputes only what the compiled loops recompute row by row.
``chunked=False`` runs :func:`attend` on everything at once with plain autograd and the PyTorch stage instead
(second derivatives, 4× the memory).
"""
from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from geomol.nn import native
from geomol.nn.atom_pairs import AtomPairs, PairIndex
from geomol.nn.attend_groups import attend_groups, attend_groups_backward
from geomol.nn.chunked import Chunk, chunked_recompute
from geomol.nn.fused_silu import bias_silu_dropout, silu_dropout_grad
from geomol.nn.group_mlp import group_mlp, group_mlp_backward, group_mlp_ready
from geomol.nn.mlp import mlp2
from geomol.nn.radial import RadialBasis
from geomol.nn.scatter import scatter_softmax, scatter_sum

__all__ = ["BilevelAttention", "attend", "attend_backward"]


_silu_backward = torch.ops.aten.silu_backward


def _group_softmax(logits: torch.Tensor, index: PairIndex) -> torch.Tensor:
    """α [p, h]: softmax of ``logits`` [p, h] within each group, on a padded [g, K, h] view."""
    n_groups, width = index.group_atom.numel(), index.width
    position = index.pair_group * width + index.pair_slot
    padded = logits.new_full((n_groups * width, logits.size(1)), float("-inf")).index_put((position,), logits)
    return torch.softmax(padded.view(n_groups, width, -1), dim=1).view(n_groups * width, -1).index_select(0, position)


def _native_ready(*tensors: torch.Tensor) -> bool:
    """Whether the compiled pair stage (:mod:`geomol.nn.native`) can take these tensors (no autograd): CPU tensors
    of one dtype, float32 or float64, outside autocast."""
    return not torch.is_autocast_enabled("cpu") and native.native_ready(*tensors)


def _pair_stage(index: PairIndex, radial, sender_rows, receiver, w_rbf, w2, b2, w3, b3, keep: bool) -> dict:
    """The per-pair MLPs and the group softmax in PyTorch (the tensors of :func:`geomol.nn.native.attend_pairs`)."""
    n_groups, rh = index.group_atom.numel(), w2.size(0) // 3
    # A contiguous [C·R/h, 3rh] weight makes autograd take the fast layout for its gradient
    # (radialᵀ·grad rather than (gradᵀ·radial)ᵀ: ~4x faster with MKL for these thin shapes).
    # The pair products stay with F.linear, not oneDNN (geomol.nn.dense): every chunk has its own
    # number of rows, and oneDNN keeps a primitive per shape (+0.15 GB at inference, +0.75 GB in
    # training on a batch of 16 pockets).
    hidden = torch.matmul(radial, w_rbf.T.contiguous()) + sender_rows
    hidden[..., :rh] += receiver.index_select(0, index.pair_group)
    # Without autograd the activations can overwrite their inputs: fewer fresh [p, h, 3rh] buffers;
    # ``keep`` needs the pre-activations.
    inplace = not torch.is_grad_enabled() and not keep
    pre1 = hidden
    act1 = F.silu(pre1, inplace=inplace)
    pre2 = F.linear(act1, w2, b2)
    hidden = F.silu(pre2, inplace=inplace)
    scalars = F.linear(hidden, w3, b3)  # [p, h, 2 + C]
    alpha = _group_softmax(scalars[..., 0], index)
    summed = scatter_sum(alpha.unsqueeze(-1) * hidden[..., rh:], index.pair_group, n_groups)  # [g, h, 2rh]
    out = dict(summed=summed.view(n_groups, -1, 2, rh).transpose(1, 2),  # [g, 2, h, rh]: node part, coordinate part
               block_sum=scatter_sum(scalars[..., 1], index.pair_group, n_groups),
               alpha_weight=alpha.unsqueeze(-1) * scalars[..., 2:])
    if keep:
        out.update(pre1=pre1, act1=act1, pre2=pre2, hidden=hidden, scalars=scalars, alpha=alpha)
    return out


def _heads(rbf_values: torch.Tensor, n_head: int) -> torch.Tensor:
    """[p, C, R] basis values → [p, h, C·R/h]: each head's slice of every channel's basis."""
    p, C = rbf_values.shape[:2]
    return rbf_values.view(p, C, n_head, -1).transpose(1, 2).reshape(p, n_head, -1)


def _attend(index: PairIndex, x, sender_rows, q_rows, edge_rows, w_rbf, w2, b2, w3, b3, b_block,
            node_w1, node_b1, node_w2, node_b2, coord_w1, coord_b1, coord_w2, coord_b2, *, rbf: RadialBasis,
            n_head: int, keep: bool = False, sender_index: torch.Tensor | None = None):
    """:func:`attend` as ``((G, ΔZ), kept)``, kept: on the compiled path, everything :func:`attend_backward` needs
    (:func:`_kept_by_forward`: the pair stage's outputs, the distances, the receivers' rows and the group level's
    results; [g, ·], [e, ·] and [p, C] tensors), None on the PyTorch path. With ``keep`` (no autograd)
    ``(None, intermediates)``: what :func:`attend_backward` needs, without computing the outputs. With
    ``sender_index`` [p], ``sender_rows`` holds one row per sending atom ([n_s, h, 3rh]) and pair k reads row
    ``sender_index[k]``."""
    h, (p, C) = n_head, x.shape[:2]
    rh = w2.size(0) // 3
    n_groups = index.group_atom.numel()
    distance = torch.linalg.vector_norm(x, dim=-1)  # [p, C]
    receiver = q_rows.index_select(0, index.group_atom) + edge_rows.index_select(0, index.group_edge)  # [g, h, rh]
    rbf_slope = radial = None
    weights = (w_rbf, w2, b2, w3, b3)
    compiled = (keep or not torch.is_grad_enabled()) and _native_ready(x, sender_rows, q_rows, edge_rows, w_rbf, w2, w3)
    node, coord = (node_w1, node_b1, node_w2, node_b2), (coord_w1, coord_b1, coord_w2, coord_b2)
    if compiled:  # (with ``keep``, the compiled backward pass recomputes the basis and the per-pair rows itself)
        s = native.attend_pairs(index.group_start, sender_rows, sender_index, receiver, *weights, distance=distance,
                                rbf=rbf)
    else:
        if keep:
            rbf_values, rbf_slope = rbf.with_derivative(distance)
            radial = _heads(rbf_values, h)
        else:
            radial = _heads(rbf(distance), h)  # [p, h, C·R/h]
        if sender_index is not None:
            sender_rows = sender_rows.index_select(0, sender_index)
        s = _pair_stage(index, radial, sender_rows, receiver, *weights, keep)
    node_in, coord_in = s["summed"].reshape(n_groups, 2, -1).unbind(1)  # [g, h rh] each
    node_kept, update = _mlp2_forward(node_in, *node, keep=keep)
    coord_kept, kappa = _mlp2_forward(coord_in, *coord, keep=keep)
    if compiled:  # the block and group level compiled too
        groups = attend_groups(index, s["block_sum"], b_block, update, kappa, s["alpha_weight"], x, h, outputs=not keep)
    else:
        groups = _groups(index, s["block_sum"], b_block, update, kappa, s["alpha_weight"], x, h, outputs=not keep)
    if keep:  # the backward pass needs these, not the outputs
        return None, dict(distance=distance, rbf_slope=rbf_slope, radial=radial, receiver=receiver, pair=s,
                          compiled=compiled, node=node_kept, update=update, coord=coord_kept, kappa=kappa,
                          **{name: groups[name] for name in _GROUP_KEPT})
    kept = dict(s, distance=distance, receiver=receiver, update=update, kappa=kappa,
                **{name: groups[name] for name in _GROUP_KEPT}) if compiled else None
    return (groups["G"], groups["dZ"]), kept


_GROUP_KEPT = ("beta_edge", "beta", "group_coef", "coef")
"""The group level's results :func:`attend_backward` reads (see :func:`geomol.nn.attend_groups.attend_groups`)."""


def _kept_by_forward(saved: dict, n_groups: int) -> dict:
    """The intermediates of ``_attend(..., keep=True)`` from what the compiled forward pass kept (``_attend(...)[1]``):
    nothing recomputed but the group MLPs' pre-activations, which their backward pass makes block by block."""
    node_in, coord_in = saved["summed"].reshape(n_groups, 2, -1).unbind(1)
    return dict(distance=saved["distance"], rbf_slope=None, radial=None, receiver=saved["receiver"], pair=saved,
                compiled=True, node=(node_in, None, None, None), update=saved["update"],
                coord=(coord_in, None, None, None), kappa=saved["kappa"],
                **{name: saved[name] for name in _GROUP_KEPT})


def _groups(index: PairIndex, block_sum, b_block, update, kappa, alpha_weight, x, n_head: int,
            outputs: bool = True) -> dict:
    """:func:`geomol.nn.attend_groups.attend_groups` in PyTorch (differentiable)."""
    (n_groups, h), C = block_sum.shape, x.size(1)
    block_logit = scatter_sum(block_sum, index.group_edge, index.edge_block.numel())
    block_logit = block_logit / index.edge_pairs.unsqueeze(1).to(x.dtype) + b_block
    beta_edge = scatter_softmax(block_logit, index.edge_block, index.n_blocks)  # [e, h]
    beta = beta_edge.index_select(0, index.group_edge)  # [g, h]
    group_coef = beta.unsqueeze(-1) * kappa.view(n_groups, h, C)
    coef = (alpha_weight * group_coef.index_select(0, index.pair_group)).sum(1)  # [p, C]
    out = dict(beta_edge=beta_edge, beta=beta, group_coef=group_coef, coef=coef)
    if outputs:
        out["G"] = scatter_sum((beta.unsqueeze(-1) * update.view(n_groups, h, -1)).view(n_groups, -1),
                               index.group_atom, index.n_atoms)
        out["dZ"] = scatter_sum(coef.unsqueeze(-1) * x, index.pair_atom, index.n_atoms)
    return out


def attend(index: PairIndex, x, sender_rows, q_rows, edge_rows, w_rbf, w2, b2, w3, b3, b_block,
           node_w1, node_b1, node_w2, node_b2, coord_w1, coord_b1, coord_w2, coord_b2, *, rbf: RadialBasis,
           n_head: int, sender_index: torch.Tensor | None = None):
    """Bilevel attention over the receiving blocks of ``index``.

    Args:
        index: local indices (p pairs, g groups, e edges, n receiving atoms).
        x: [p, C, 3] pair vectors Z_i − Z_j.
        sender_rows: [p, h, 3rh] key/value terms of each pair's sending atom (with ``sender_index`` [p]:
            [n_s, h, 3rh] terms of the sending atoms, pair k reading row ``sender_index[k]``).
        q_rows: [n, h, rh] query terms (with the attention-MLP bias) of the receiving atoms.
        edge_rows: [e, h, rh] edge-feature terms of the edges.
        w_rbf [3rh, C·R/h], w2 [3rh, 3rh], b2 [3rh]: RBF part of the three first layers and the
            block-diagonal second layers; w3 [2 + C, 3rh], b3 [2 + C]: atom logit, block logit,
            coordinate weights; b_block: block-logit bias; node_* and coord_*: the two group MLPs.
    Returns:
        G [n, d] (before ``node_out_linear``) and ΔZ [n, C, 3].
    """
    return _attend(index, x, sender_rows, q_rows, edge_rows, w_rbf, w2, b2, w3, b3, b_block, node_w1, node_b1,
                   node_w2, node_b2, coord_w1, coord_b1, coord_w2, coord_b2, rbf=rbf, n_head=n_head,
                   sender_index=sender_index)[0]


def _mlp2_forward(inp, w1, b1, w2, b2, keep: bool = True):
    """(kept, SiLU(SiLU(inp w1ᵀ + b1) w2ᵀ + b2)), kept = (inp, first pre-activation, its SiLU, second
    pre-activation): what :func:`_mlp2_backward` needs (``keep=False``: not needed, maybe not made). Compiled
    where it can be (:mod:`geomol.nn.group_mlp`: kept then holds None for the SiLU, which its backward pass makes
    itself); else each product is followed by one pass for its bias and SiLU."""
    if group_mlp_ready(inp, w1, b1, w2, b2):
        out, pre1, pre2 = group_mlp(inp, w1, b1, w2, b2, keep=keep)
        return (inp, pre1, None, pre2), out
    pre1 = inp @ w1.T
    act1 = bias_silu_dropout(pre1, b1)  # pre1 ← pre1 + b1
    pre2 = act1 @ w2.T
    return (inp, pre1, act1, pre2), bias_silu_dropout(pre2, b2)


def _mlp2_backward(grad, kept, w1, b1, w2, b2, g_inp=None):
    """Gradients (input, w1, b1, w2, b2) of SiLU(SiLU(inp w1ᵀ + b1) w2ᵀ + b2), given ``grad`` of its output
    and ``kept`` = (inp, first pre-activation, its SiLU, second pre-activation) from :func:`_mlp2_forward`
    (compiled: the SiLU None, and the pre-activations None where the compiled backward pass recomputes them);
    ``g_inp``: a [g, K] tensor (e.g. a column slice) the input's gradient is written into, else a new one."""
    inp, pre1, act1, pre2 = kept
    if act1 is None:  # the compiled forward pass made these (or they are to be recomputed)
        grads = group_mlp_backward(grad, inp, pre1, pre2, w1, w2, g_x=g_inp, b1=b1, b2=b2)
    else:
        g2 = silu_dropout_grad(grad, pre2)
        g1 = silu_dropout_grad(g2 @ w2, pre1)
        grads = g1 @ w1, g1.T @ inp, g1.sum(0), g2.T @ act1, g2.sum(0)
    if g_inp is not None and grads[0] is not g_inp:
        g_inp.copy_(grads[0])
    return grads


def _groups_backward(index: PairIndex, grad_G, grad_dZ, kept: dict, update, kappa, alpha_weight, x,
                     n_head: int) -> dict:
    """:func:`geomol.nn.attend_groups.attend_groups_backward` in PyTorch (the same arguments)."""
    (p, C), h = x.shape[:2], n_head
    n_groups, n_edges = index.group_atom.numel(), index.edge_block.numel()
    pg, ge, beta = index.pair_group, index.group_edge, kept["beta"]
    g_beta = x.new_zeros(n_groups, h)
    found = dict(x=torch.zeros_like(x), alpha_weight=None, kappa=None, update=None)
    # ΔZ = Σ coef x, coef = Σ_heads α w_c (β κ)[group] = Σ_heads alpha_weight · group_coef
    if grad_dZ is not None:
        g_pair = grad_dZ.index_select(0, index.pair_atom)  # [p, C, 3]
        g_coef = (g_pair * x).sum(-1).unsqueeze(1)  # [p, 1, C]
        found["x"] = g_pair.mul_(kept["coef"].unsqueeze(-1))
        found["alpha_weight"] = g_coef * kept["group_coef"].index_select(0, pg)  # [p, h, C]
        g_group_coef = scatter_sum(g_coef * alpha_weight, pg, n_groups)  # [g, h, C]
        g_beta += (g_group_coef * kappa.view(n_groups, h, C)).sum(-1)
        found["kappa"] = (g_group_coef * beta.unsqueeze(-1)).view(n_groups, -1)
    if grad_G is not None:  # G = Σ β · update
        g_update = grad_G.index_select(0, index.group_atom).view(n_groups, h, -1)
        g_beta += (g_update * update.view(n_groups, h, -1)).sum(-1)
        found["update"] = (g_update * beta.unsqueeze(-1)).view(n_groups, -1)
    # block level: β = softmax over the edges into a block of τ_e = mean of the pairs' block logits + b
    g_beta_edge = scatter_sum(g_beta, ge, n_edges)  # [e, h]
    beta_edge = kept["beta_edge"]
    inner = scatter_sum(g_beta_edge * beta_edge, index.edge_block, index.n_blocks)
    g_logit = beta_edge * (g_beta_edge - inner.index_select(0, index.edge_block))  # [e, h]
    found["b_block"] = g_logit.sum().reshape(1)
    found["block_sum"] = (g_logit / index.edge_pairs.unsqueeze(1).to(x.dtype)).index_select(0, ge)  # [g, h]
    return found


def _pair_stage_backward(index: PairIndex, kept: dict, radial, w_rbf, w2, w3, g_summed, g_block_sum,
                         g_alpha_weight) -> dict:
    """The gradients of :func:`native.attend_pairs_backward <geomol.nn.native.attend_pairs_backward>` in PyTorch,
    from the tensors :func:`_pair_stage` kept (``keep=True``)."""
    p, h = radial.shape[:2]
    n_groups, rh = index.group_atom.numel(), w2.size(0) // 3
    pg = index.pair_group
    alpha, scalars, hidden = kept["alpha"], kept["scalars"], kept["hidden"]
    g_summed = g_summed.transpose(1, 2).reshape(n_groups, h, 2 * rh)  # [g, 2, h, rh] → [g, h, 2rh]
    g_values = g_summed.index_select(0, pg)  # [p, h, 2rh]; summed = Σ α hidden[rh:]
    g_alpha = (g_values * hidden[..., rh:]).sum(-1) + (g_alpha_weight * scalars[..., 2:]).sum(-1)  # [p, h]
    g_scalars = torch.empty_like(scalars)
    g_alpha_mean = scatter_sum(g_alpha * alpha, pg, n_groups).index_select(0, pg)
    g_scalars[..., 0] = alpha * (g_alpha - g_alpha_mean)  # α = softmax within the group
    g_scalars[..., 1] = g_block_sum.index_select(0, pg)
    g_scalars[..., 2:] = g_alpha_weight * alpha.unsqueeze(-1)
    flat_g = g_scalars.view(p * h, -1)
    g_hidden = (flat_g @ w3).view(p, h, -1)
    g_hidden[..., rh:] += g_values.mul_(alpha.unsqueeze(-1))
    g_pre2 = _silu_backward(g_hidden, kept["pre2"]).view(p * h, -1)
    g_pre1 = _silu_backward((g_pre2 @ w2).view(p, h, -1), kept["pre1"])  # [p, h, 3rh]
    flat_pre1 = g_pre1.view(p * h, -1)
    return dict(sender=g_pre1, receiver=scatter_sum(g_pre1[..., :rh], pg, n_groups),
                radial=(flat_pre1 @ w_rbf).view(p, h, -1), w_rbf=flat_pre1.T @ radial.view(p * h, -1),
                w2=torch.block_diag(*native.diagonal_blocks(g_pre2.T @ kept["act1"].view(p * h, -1), rh)),
                b2=g_pre2.sum(0), w3=flat_g.T @ hidden.view(p * h, -1), b3=flat_g.sum(0))


def attend_backward(index: PairIndex, inputs, grads, *, rbf: RadialBasis, n_head: int, saved: dict | None = None,
                    sender_index: torch.Tensor | None = None):
    """Gradients of :func:`attend` with respect to its 18 tensor ``inputs`` (in :func:`attend`'s order), given
    ``grads``, the gradients (grad_G [n, d], grad_dZ [n, C, 3]; either may be None) of its outputs, and ``saved``,
    what the compiled forward pass kept where it kept something (``_attend(...)[1]``). The gradient of the
    block-diagonal ``w2`` is returned on its three diagonal blocks (zero elsewhere); with ``sender_index`` (as in
    :func:`attend`), the sender rows' gradient is summed per sending atom.

    Written by hand, the chain rule on whole tensors with no autograd graph (a chunk of the chunked path). With
    ``saved`` nothing is recomputed here (the compiled backward passes of the pair stage and the group MLPs
    recompute their per-pair and per-group rows themselves, :func:`geomol.nn.native.attend_pairs_backward`,
    :func:`~geomol.nn.group_mlp.group_mlp_backward`); without it the forward pass is recomputed once without
    autograd."""
    grad_G, grad_dZ = grads
    (x, sender_rows, q_rows, edge_rows, w_rbf, w2, b2, w3, b3, b_block, node_w1, node_b1, node_w2, node_b2,
     coord_w1, coord_b1, coord_w2, coord_b2) = inputs
    with torch.no_grad():
        h, (p, C) = n_head, x.shape[:2]
        rh, n_groups = w2.size(0) // 3, index.group_atom.numel()
        if saved is not None:
            s = _kept_by_forward(saved, n_groups)
        else:
            _, s = _attend(index, *inputs, rbf=rbf, n_head=n_head, keep=True, sender_index=sender_index)
        groups_backward = attend_groups_backward if s["compiled"] else _groups_backward
        found = groups_backward(index, grad_G, grad_dZ, s, s["update"], s["kappa"], s["pair"]["alpha_weight"], x, h)
        g_x, g_alpha_weight = found["x"], found["alpha_weight"]
        g_summed = x.new_zeros(n_groups, 2, h * rh)  # as summed: node part, coordinate part
        coord_grads = node_grads = None
        if grad_G is not None:
            _, *node_grads = _mlp2_backward(found["update"], s["node"], node_w1, node_b1, node_w2, node_b2,
                                            g_inp=g_summed[:, 0])
        if grad_dZ is not None:
            _, *coord_grads = _mlp2_backward(found["kappa"], s["coord"], coord_w1, coord_b1, coord_w2, coord_b2,
                                             g_inp=g_summed[:, 1])
        else:
            g_alpha_weight = x.new_zeros(p, h, C)
        g_summed = g_summed.view(n_groups, 2, h, rh)
        g_b_block, g_block_sum = found["b_block"].reshape(b_block.shape), found["block_sum"]
        # the per-pair stage
        distance = s["distance"]
        if s["compiled"]:
            pair = native.attend_pairs_backward(index.group_start, sender_rows, sender_index, s["receiver"], w_rbf, w2,
                                                b2, w3, b3, g_summed, g_block_sum, g_alpha_weight, distance=distance,
                                                rbf=rbf)
            g_distance = pair["distance"]
        else:
            pair = _pair_stage_backward(index, s["pair"], s["radial"], w_rbf, w2, w3, g_summed, g_block_sum,
                                        g_alpha_weight)
            if sender_index is not None:
                pair["sender"] = torch.zeros_like(sender_rows).index_add_(0, sender_index, pair["sender"])
            g_radial = pair["radial"].view(p, h, C, -1).transpose(1, 2).reshape(p, C, -1)
            g_distance = (g_radial * s["rbf_slope"]).sum(-1)  # [p, C]
        g_q = scatter_sum(pair["receiver"], index.group_atom, q_rows.size(0))
        g_edge = scatter_sum(pair["receiver"], index.group_edge, edge_rows.size(0))
        g_x += x * (g_distance / distance).masked_fill_(distance == 0, 0.0).unsqueeze(-1)
        node_grads = node_grads or [None] * 4
        coord_grads = coord_grads or [None] * 4
        return (g_x, pair["sender"], g_q, g_edge, pair["w_rbf"], pair["w2"], pair["b2"], pair["w3"], pair["b3"],
                g_b_block, *node_grads, *coord_grads)


class BilevelAttention(nn.Module):
    """One GET layer: atom-level and block-level attention with an equivariant coordinate update.

    Args:
        d_hidden: d, size of atom features H.
        d_radial: r, size of the attention/message space (split into ``n_head`` chunks).
        n_channel: C, coordinates per atom.
        n_rbf: R, radial basis functions (split into ``n_head`` chunks).
        cutoff: RBF cutoff, in the units of Z.
        d_edge: size of edge features (0: no edge features).
        n_head: h; r, R and d must be divisible by h.
        chunked: True (default): process receiving blocks in chunks recomputed in backward (fast,
            memory independent of the number of pairs, no second derivatives); False: plain autograd
            on everything at once.

    Shapes (``forward``): H [N, d], Z [N, C, 3], pairs (P pairs, M groups, E edges),
    edge_attr [E, d_edge] → (H [N, d], Z [N, C, 3]).

    Submodule names and shapes follow the official ``GETLayer`` (``linear_qk`` rows 0, 2, 4, …
    give queries, rows 1, 3, 5, … keys).
    """

    def __init__(self, d_hidden: int, d_radial: int, n_channel: int, n_rbf: int, cutoff: float = 7.0,
                 d_edge: int = 0, n_head: int = 4, chunked: bool = True):
        super().__init__()
        if d_radial % n_head or n_rbf % n_head or d_hidden % n_head:
            raise ValueError(f"d_hidden {d_hidden}, d_radial {d_radial} and n_rbf {n_rbf} must be divisible by "
                             f"n_head {n_head}")
        self.n_head, self.n_channel, self.chunked = n_head, n_channel, chunked
        self.rh, self.dh, self.rbf_h = d_radial // n_head, d_hidden // n_head, n_rbf // n_head
        rh, crh = self.rh, n_channel * self.rbf_h
        self.linear_qk = nn.Linear(self.dh, 2 * rh, bias=False)
        self.linear_v = nn.Linear(self.dh, rh)
        self.rbf = RadialBasis(n_rbf, cutoff)
        self.att_mlp = mlp2(3 * rh + crh if d_edge else 2 * rh + crh, rh, rh)
        self.unit_att_linear = nn.Linear(rh, 1)
        self.block_att_linear = nn.Linear(rh, 1)
        self.edge_linear = nn.Linear(d_edge, d_radial) if d_edge else None
        self.node_mlp = mlp2(d_radial, d_hidden, d_hidden)
        self.node_out_linear = nn.Linear(d_hidden, d_hidden)
        self.coord_mlp = mlp2(d_radial, d_hidden, n_head * n_channel)
        self.unit_msg_mlp = mlp2(rh + crh, rh, rh)
        self.unit_msg_coord_mlp = mlp2(rh + crh, rh, rh)
        self.unit_msg_coord_linear = nn.Linear(rh, n_channel)

    def _atom_terms(self, H, edge_attr, n_edges):
        """Query terms [N, h, rh], sender terms [N, h, 3rh] and edge terms [E, h, rh]."""
        h, rh, crh = self.n_head, self.rh, self.n_channel * self.rbf_h
        att, msg, cmsg = self.att_mlp[0], self.unit_msg_mlp[0], self.unit_msg_coord_mlp[0]
        heads = H.view(H.size(0), h, self.dh)
        qk = self.linear_qk(heads)
        v = self.linear_v(heads)
        query = F.linear(qk[..., 0::2], att.weight[:, :rh], att.bias)
        sender = torch.cat([qk[..., 1::2] @ att.weight[:, rh:2 * rh].T, F.linear(v, msg.weight[:, :rh], msg.bias),
                            F.linear(v, cmsg.weight[:, :rh], cmsg.bias)], -1)
        if self.edge_linear is None:
            return query, sender, H.new_zeros(n_edges, h, rh)
        edge = self.edge_linear(edge_attr).view(n_edges, h, rh) @ att.weight[:, 2 * rh + crh:].T
        return query, sender, edge

    def _kernel_weights(self):
        """The weights of :func:`attend`, assembled from the official-layout parameters."""
        rh, crh, C = self.rh, self.n_channel * self.rbf_h, self.n_channel
        att, msg, cmsg = self.att_mlp, self.unit_msg_mlp, self.unit_msg_coord_mlp
        w_rbf = torch.cat([att[0].weight[:, 2 * rh:2 * rh + crh], msg[0].weight[:, rh:], cmsg[0].weight[:, rh:]])
        w2 = torch.block_diag(att[2].weight, msg[2].weight, cmsg[2].weight)
        b2 = torch.cat([att[2].bias, msg[2].bias, cmsg[2].bias])
        logits = torch.cat([self.unit_att_linear.weight, self.block_att_linear.weight])
        zeros = logits.new_zeros
        w3 = torch.cat([torch.cat([logits, zeros(2, 2 * rh)], 1),
                        torch.cat([zeros(C, 2 * rh), self.unit_msg_coord_linear.weight], 1)])
        b3 = torch.cat([self.unit_att_linear.bias, zeros(1), self.unit_msg_coord_linear.bias])
        node, coord = self.node_mlp, self.coord_mlp
        return (w_rbf, w2, b2, w3, b3, self.block_att_linear.bias, node[0].weight, node[0].bias, node[2].weight,
                node[2].bias, coord[0].weight, coord[0].bias, coord[2].weight, coord[2].bias)

    def forward(self, H: torch.Tensor, Z: torch.Tensor, pairs: AtomPairs,
                edge_attr: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        query, sender, edge = self._atom_terms(H, edge_attr, pairs.edge_pairs.numel())
        x = Z.index_select(0, pairs.pair_atom) - Z.index_select(0, pairs.pair_neighbor)  # [P, C, 3]
        fn = partial(attend, rbf=self.rbf, n_head=self.n_head)
        native.forget_derived([*self.parameters(), *self.buffers()])  # writes through .data since the last pass
        weights = self._kernel_weights()
        if self.chunked and not torch.is_grad_enabled() and _native_ready(x, sender, query, edge, *weights[:4]):
            # inference with the compiled pair stage: chunks read the sending atoms' rows in place
            G, dZ = H.new_zeros(H.shape), torch.zeros_like(Z)
            for c in pairs.chunks:
                (a0, a1), (p0, p1) = c.atoms, c.pairs
                G[a0:a1], dZ[a0:a1] = fn(c.index, x[p0:p1], sender, query[a0:a1], edge.index_select(0, c.edge_ids),
                                         *weights, sender_index=c.neighbor)
        elif self.chunked:
            # every chunk reads the rows of its distinct sending atoms, each pair through its position among them
            # (the context: index and positions), and its sender gradient comes summed per sending atom
            chunks = [Chunk((c.index, c.sender_local),
                            (c.pairs, c.senders, c.atoms, c.edge_ids) + (None,) * len(weights), (c.atoms, c.atoms))
                      for c in pairs.chunks]
            # under autocast the chunks' inputs mix dtypes: recompute them under autograd instead
            hand_written = not torch.is_autocast_enabled(H.device.type)
            options = dict(rbf=self.rbf, n_head=self.n_head)
            G, dZ = chunked_recompute(
                lambda chunk, *inputs: attend(chunk[0], *inputs, sender_index=chunk[1], **options),
                (x, sender, query, edge, *weights), chunks, (H.shape, Z.shape),
                backward=(lambda chunk, inputs, grads, saved=None: attend_backward(
                    chunk[0], inputs, grads, saved=saved, sender_index=chunk[1], **options)) if hand_written else None,
                forward=(lambda chunk, *inputs: _attend(chunk[0], *inputs, sender_index=chunk[1], **options))
                if hand_written else None)
        else:
            G, dZ = fn(pairs.full_index(), x, sender.index_select(0, pairs.pair_neighbor), query, edge, *weights)
        return H + self.node_out_linear(G), Z + dZ
