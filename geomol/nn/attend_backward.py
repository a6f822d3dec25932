"""The hand-written backward pass of GET's bilevel attention (:func:`geomol.nn.attend.attend`): the chain rule on
whole tensors with no autograd graph, for one chunk of receiving blocks of the chunked path
(:mod:`geomol.nn.chunked`). With what the compiled forward pass kept nothing is recomputed here (the compiled
backward passes of the pair stage and the group MLPs recompute their per-pair and per-group rows themselves);
without it the forward pass is recomputed once without autograd.
"""
from __future__ import annotations

import torch

from geomol.nn import native
from geomol.nn.atom_pairs import PairIndex
from geomol.nn.attend import (AttendInputs, AttendWeights, AttentionHeads, GroupMLP, PairWeights, _attend,
                              kept_by_forward)
from geomol.nn.attend_groups import attend_groups_backward
from geomol.nn.fused_silu import silu_dropout_grad
from geomol.nn.group_mlp import group_mlp_backward
from geomol.nn.scatter import scatter_sum

__all__ = ["attend_backward", "mlp2_backward"]

_silu_backward = torch.ops.aten.silu_backward


def attend_backward(index: PairIndex, inputs: AttendInputs, weights: AttendWeights, grads, heads: AttentionHeads,
                    saved: dict | None = None) -> tuple[tuple[torch.Tensor, ...], AttendWeights]:
    """Gradients of :func:`~geomol.nn.attend.attend` with respect to its inputs and weights.

    Args:
        index, inputs, weights, heads: as for :func:`~geomol.nn.attend.attend` (tensors detached).
        grads: (grad_G [n, d], grad_dZ [n, C, 3]), the gradients of its outputs; either may be None.
        saved: what the compiled forward pass kept, where it kept something (``_attend(...)[1]``).

    Returns:
        (the gradients of ``inputs.tensors`` — x, sender_rows (summed per sending atom with ``sender_index``),
        q_rows, edge_rows — and an :class:`~geomol.nn.attend.AttendWeights` of the weights' gradients; the
        block-diagonal ``w2``'s gradient is on its three diagonal blocks, zero elsewhere). Gradients of a group MLP
        are None when its output's gradient is.
    """
    grad_G, grad_dZ = grads
    x, sender_rows, q_rows, edge_rows, sender_index = inputs
    with torch.no_grad():
        h, (p, C) = heads.n_head, x.shape[:2]
        rh, n_groups = weights.pair.w2.size(0) // 3, index.group_atom.numel()
        if saved is not None:
            s = kept_by_forward(saved, n_groups)
        else:
            _, s = _attend(index, inputs, weights, heads, keep=True)
        groups_backward = attend_groups_backward if s["compiled"] else _groups_backward
        found = groups_backward(index, grad_G, grad_dZ, s, s["update"], s["kappa"], s["pair"]["alpha_weight"], x, h)
        g_x, g_alpha_weight = found["x"], found["alpha_weight"]
        g_summed = x.new_zeros(n_groups, 2, h * rh)  # as summed: node part, coordinate part
        coord_grads = node_grads = None
        if grad_G is not None:
            _, *node_grads = mlp2_backward(found["update"], s["node"], *weights.node, g_inp=g_summed[:, 0])
        if grad_dZ is not None:
            _, *coord_grads = mlp2_backward(found["kappa"], s["coord"], *weights.coord, g_inp=g_summed[:, 1])
        else:
            g_alpha_weight = x.new_zeros(p, h, C)
        g_summed = g_summed.view(n_groups, 2, h, rh)
        g_b_block, g_block_sum = found["b_block"].reshape(weights.b_block.shape), found["block_sum"]
        pair = _pair_backward(index, inputs, weights.pair, s, heads, g_summed, g_block_sum, g_alpha_weight)
        g_q = scatter_sum(pair["receiver"], index.group_atom, q_rows.size(0))
        g_edge = scatter_sum(pair["receiver"], index.group_edge, edge_rows.size(0))
        distance = s["distance"]
        g_x += x * (pair["distance"] / distance).masked_fill_(distance == 0, 0.0).unsqueeze(-1)
        none = GroupMLP(None, None, None, None)
        weight_grads = AttendWeights(PairWeights(pair["w_rbf"], pair["w2"], pair["b2"], pair["w3"], pair["b3"]),
                                     g_b_block, GroupMLP(*node_grads) if node_grads else none,
                                     GroupMLP(*coord_grads) if coord_grads else none)
        return (g_x, pair["sender"], g_q, g_edge), weight_grads


def _pair_backward(index: PairIndex, inputs: AttendInputs, pair_weights: PairWeights, s: dict, heads: AttentionHeads,
                   g_summed, g_block_sum, g_alpha_weight) -> dict:
    """The per-pair stage's gradients (sender rows, receiver rows, the pair weights) and the distances' ``distance``
    [p, C], compiled or in PyTorch as the forward pass ran."""
    x, sender_rows, _, _, sender_index = inputs
    (p, C), h = x.shape[:2], heads.n_head
    if s["compiled"]:
        return native.attend_pairs_backward(index.group_start, sender_rows, sender_index, s["receiver"],
                                            *pair_weights, g_summed, g_block_sum, g_alpha_weight,
                                            distance=s["distance"], rbf=heads.rbf)
    pair = _pair_stage_backward(index, s["pair"], s["radial"], pair_weights.w_rbf, pair_weights.w2, pair_weights.w3,
                                g_summed, g_block_sum, g_alpha_weight)
    if sender_index is not None:
        pair["sender"] = torch.zeros_like(sender_rows).index_add_(0, sender_index, pair["sender"])
    g_radial = pair["radial"].view(p, h, C, -1).transpose(1, 2).reshape(p, C, -1)
    pair["distance"] = (g_radial * s["rbf_slope"]).sum(-1)  # [p, C]
    return pair


def mlp2_backward(grad, kept, w1, b1, w2, b2, g_inp=None):
    """Gradients (input, w1, b1, w2, b2) of SiLU(SiLU(inp w1ᵀ + b1) w2ᵀ + b2), given ``grad`` of its output
    and ``kept`` = (inp, first pre-activation, its SiLU, second pre-activation) from
    :func:`~geomol.nn.attend.mlp2_forward` (compiled: the SiLU None, and the pre-activations None where the compiled backward pass recomputes them);
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
    C, h = x.size(1), n_head
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
    from the tensors :func:`~geomol.nn.attend._pair_stage` kept (``keep=True``)."""
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
