"""GET's bilevel attention as a function (``specs/GET.md`` §3 and §5): the one statement of its maths, in
:func:`attend`, and its forward pass on a set of receiving blocks.

:func:`attend` states what every path computes — the PyTorch formulation here (differentiable, any device), the
compiled loops of :mod:`geomol.nn.native` / :mod:`geomol.nn.attend_groups` / :mod:`geomol.nn.group_mlp` (CPU, no
autograd) and the hand-written backward pass of :mod:`geomol.nn.attend_backward` — and
``tests/nn/test_attention_paths.py`` checks each path against a loop-by-loop reading of the same formulas.
Its arguments come as typed records: what is read per pair, atom and edge (:class:`AttendInputs`), the weights
(:class:`AttendWeights`: the pair MLPs' stacked layers, the block-logit bias, the two group MLPs) and how the radial
basis and the features split into heads (:class:`AttentionHeads`). The layer that builds them from the official
parameter layout is :class:`geomol.nn.bilevel_attention.BilevelAttention`.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from geomol.nn import native
from geomol.nn.atom_pairs import PairIndex
from geomol.nn.attend_groups import attend_groups
from geomol.nn.fused_silu import bias_silu_dropout
from geomol.nn.group_mlp import group_mlp, group_mlp_ready
from geomol.nn.radial import RadialBasis
from geomol.nn.scatter import scatter_softmax, scatter_sum

__all__ = ["AttendInputs", "PairWeights", "GroupMLP", "AttendWeights", "AttentionHeads", "attend"]


class AttendInputs(NamedTuple):
    """What the attention reads, per pair, receiving atom and edge (shapes in :func:`attend`'s notes).

    Attributes:
        x: [p, C, 3] pair vectors Z_i − Z_j, in the units of Z (GET: Å/10).
        sender_rows: [p, h, 3rh] each pair's key/value terms of its sending atom j (with ``sender_index``:
            [n_s, h, 3rh], one row per sending atom, pair k reading row ``sender_index[k]``).
        q_rows: [n, h, rh] query terms (with the attention MLP's first bias) of the receiving atoms.
        edge_rows: [e, h, rh] edge-feature terms of the block edges.
        sender_index: [p] long, or None (``sender_rows`` per pair). An index, never differentiated.
    """

    x: torch.Tensor
    sender_rows: torch.Tensor
    q_rows: torch.Tensor
    edge_rows: torch.Tensor
    sender_index: torch.Tensor | None = None

    @property
    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The four differentiable inputs, in order (x, sender_rows, q_rows, edge_rows)."""
        return self.x, self.sender_rows, self.q_rows, self.edge_rows


class PairWeights(NamedTuple):
    """The three pair MLPs (attention r, message m, coordinate message μ) stacked, and their scalar read-outs.

    Attributes:
        w_rbf: [3rh, C·R/h] the radial-basis columns of the three first layers.
        w2, b2: [3rh, 3rh] block-diagonal second layers and [3rh] their biases.
        w3, b3: [2 + C, 3rh] and [2 + C]: atom logit s (from r), block logit (from r), coordinate weights w_c (from μ).
    """

    w_rbf: torch.Tensor
    w2: torch.Tensor
    b2: torch.Tensor
    w3: torch.Tensor
    b3: torch.Tensor


class GroupMLP(NamedTuple):
    """A two-layer SiLU MLP on each group: SiLU(SiLU(u w1ᵀ + b1) w2ᵀ + b2)."""

    w1: torch.Tensor
    b1: torch.Tensor
    w2: torch.Tensor
    b2: torch.Tensor


class AttendWeights(NamedTuple):
    """The weights of :func:`attend`.

    Attributes:
        pair: :class:`PairWeights`. b_block: [1] the block logit's bias.
        node: [h·rh → d → d] the node MLP (U, before ``node_out_linear``).
        coord: [h·rh → d → h·C] the coordinate MLP (κ).
    """

    pair: PairWeights
    b_block: torch.Tensor
    node: GroupMLP
    coord: GroupMLP

    def flat(self) -> tuple[torch.Tensor, ...]:
        """The 14 tensors in order: pair (5), b_block, node (4), coord (4)."""
        return (*self.pair, self.b_block, *self.node, *self.coord)

    @classmethod
    def from_flat(cls, tensors) -> "AttendWeights":
        """The record of :meth:`flat`'s 14 tensors."""
        t = tuple(tensors)
        return cls(PairWeights(*t[:5]), t[5], GroupMLP(*t[6:10]), GroupMLP(*t[10:14]))


class AttentionHeads(NamedTuple):
    """How the attention splits into heads: the radial basis (R functions, cutoff in the units of Z, partitioned
    R/h per head) and the number of heads h (h divides d, r and R)."""

    rbf: RadialBasis
    n_head: int


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


def attend(index: PairIndex, inputs: AttendInputs, weights: AttendWeights, heads: AttentionHeads
           ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""GET's bilevel attention over the receiving blocks of ``index``: the one statement of its maths.

    Every atom i of a receiving block I attends, for each block edge e = (I, J), to the group of its k nearest
    atoms j of J (:mod:`geomol.nn.atom_pairs`). Per head t (h heads; each sees the t-th slice of the features, of
    the edge features and of the radial basis), with ρ_ij = RBF(|x_ij|) restricted to the head's R/h functions
    and channels, and ``[·, ·]`` concatenation:

    * pair MLPs (SiLU, two layers):
      r_ij = MLP_att([q_i, k_j, ρ_ij, ε_e]), m_ij = MLP_msg([v_j, ρ_ij]), μ_ij = MLP_coord([v_j, ρ_ij]);
    * atom level: α_ij = softmax over the group's j of s_ij = w_s · r_ij + b_s (no dot product, no 1/√d);
    * block level: τ_e = w_τ · mean over the pairs of edge e of r_ij + b_block, β_e = softmax of τ over the edges
      entering block I;
    * G_i = Σ_e β_e U_ie with U = MLP_node([Σ_j α_ij m_ij over heads]) (per head's d/h slice), and
      ΔZ_i = Σ_e Σ_t β_e κ_iet Σ_j α_ij w_ijt x_ij with κ = MLP_coord-group([Σ_j α_ij μ_ij over heads]) and
      w_ijt = W_c μ_ij + b_c (one weight per channel): coordinates move along x_ij = Z_i − Z_j only, so ΔZ
      rotates, reflects and translates with Z (E(3)-equivariant) and G is invariant.

    The layer then adds ``node_out_linear(G)`` to H and ΔZ to Z (:class:`~geomol.nn.bilevel_attention.
    BilevelAttention`). The first linear layer of each pair MLP is applied in parts: query, key/value and edge
    terms once per atom or edge (``inputs``), the basis columns (``weights.pair.w_rbf``) once per pair.

    Shapes:
        p pairs, g groups, e edges, n receiving atoms, n_s sending atoms; d = hidden width, r = radial width
        (``radial_dim``), h heads, rh = r/h, R radial functions, C coordinate channels.

        - **index**: :class:`~geomol.nn.atom_pairs.PairIndex` of the p pairs (g groups, e edges, n atoms).
        - **inputs**: :class:`AttendInputs` — x [p, C, 3] (units of Z: Å/10 in GET), sender_rows [p or n_s, h,
          3rh], q_rows [n, h, rh], edge_rows [e, h, rh].
        - **weights**: :class:`AttendWeights` — w_rbf [3rh, C·R/h], w2 [3rh, 3rh], b2 [3rh], w3 [2 + C, 3rh],
          b3 [2 + C], b_block [1], node (h·rh → d → d), coord (h·rh → d → h·C).
        - **heads**: :class:`AttentionHeads` — the basis (cutoff in the units of Z) and h.
        - **output**: (G [n, d], ΔZ [n, C, 3] in the units of Z).
    """
    return _attend(index, inputs, weights, heads)[0]


def _attend(index: PairIndex, inputs: AttendInputs, weights: AttendWeights, heads: AttentionHeads,
            keep: bool = False):
    """:func:`attend` as ``((G, ΔZ), kept)``, kept: on the compiled path, everything
    :func:`~geomol.nn.attend_backward.attend_backward` needs (:func:`kept_by_forward`: the pair stage's outputs, the
    distances, the receivers' rows and the group level's results; [g, ·], [e, ·] and [p, C] tensors), None on the
    PyTorch path. With ``keep`` (no autograd) ``(None, intermediates)``: what the backward pass needs, without
    computing the outputs."""
    x, sender_rows, q_rows, edge_rows, sender_index = inputs
    h, n_groups = heads.n_head, index.group_atom.numel()
    distance = torch.linalg.vector_norm(x, dim=-1)  # [p, C]
    receiver = q_rows.index_select(0, index.group_atom) + edge_rows.index_select(0, index.group_edge)  # [g, h, rh]
    rbf_slope = radial = None
    compiled = (keep or not torch.is_grad_enabled()) and _native_ready(x, sender_rows, q_rows, edge_rows,
                                                                       weights.pair.w_rbf, weights.pair.w2,
                                                                       weights.pair.w3)
    if compiled:  # (with ``keep``, the compiled backward pass recomputes the basis and the per-pair rows itself)
        s = native.attend_pairs(index.group_start, sender_rows, sender_index, receiver, *weights.pair,
                                distance=distance, rbf=heads.rbf)
    else:
        if keep:
            rbf_values, rbf_slope = heads.rbf.with_derivative(distance)
            radial = _heads(rbf_values, h)
        else:
            radial = _heads(heads.rbf(distance), h)  # [p, h, C·R/h]
        if sender_index is not None:
            sender_rows = sender_rows.index_select(0, sender_index)
        s = _pair_stage(index, radial, sender_rows, receiver, *weights.pair, keep)
    node_in, coord_in = s["summed"].reshape(n_groups, 2, -1).unbind(1)  # [g, h rh] each
    node_kept, update = mlp2_forward(node_in, *weights.node, keep=keep)
    coord_kept, kappa = mlp2_forward(coord_in, *weights.coord, keep=keep)
    group_level = attend_groups if compiled else _groups  # the block and group level compiled too
    groups = group_level(index, s["block_sum"], weights.b_block, update, kappa, s["alpha_weight"], x, h,
                         outputs=not keep)
    if keep:  # the backward pass needs these, not the outputs
        return None, dict(distance=distance, rbf_slope=rbf_slope, radial=radial, receiver=receiver, pair=s,
                          compiled=compiled, node=node_kept, update=update, coord=coord_kept, kappa=kappa,
                          **{name: groups[name] for name in GROUP_KEPT})
    kept = dict(s, distance=distance, receiver=receiver, update=update, kappa=kappa,
                **{name: groups[name] for name in GROUP_KEPT}) if compiled else None
    return (groups["G"], groups["dZ"]), kept


GROUP_KEPT = ("beta_edge", "beta", "group_coef", "coef")
"""The group level's results :func:`~geomol.nn.attend_backward.attend_backward` reads (see
:func:`geomol.nn.attend_groups.attend_groups`)."""


def kept_by_forward(saved: dict, n_groups: int) -> dict:
    """The intermediates of ``_attend(..., keep=True)`` from what the compiled forward pass kept (``_attend(...)[1]``):
    nothing recomputed but the group MLPs' pre-activations, which their backward pass makes block by block."""
    node_in, coord_in = saved["summed"].reshape(n_groups, 2, -1).unbind(1)
    return dict(distance=saved["distance"], rbf_slope=None, radial=None, receiver=saved["receiver"], pair=saved,
                compiled=True, node=(node_in, None, None, None), update=saved["update"],
                coord=(coord_in, None, None, None), kappa=saved["kappa"],
                **{name: saved[name] for name in GROUP_KEPT})


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


def mlp2_forward(inp, w1, b1, w2, b2, keep: bool = True):
    """(kept, SiLU(SiLU(inp w1ᵀ + b1) w2ᵀ + b2)), kept = (inp, first pre-activation, its SiLU, second
    pre-activation): what :func:`~geomol.nn.attend_backward.mlp2_backward` needs (``keep=False``: not needed, maybe
    not made). Compiled where it can be (:mod:`geomol.nn.group_mlp`: kept then holds None for the SiLU, which its
    backward pass makes itself); else each product is followed by one pass for its bias and SiLU."""
    if group_mlp_ready(inp, w1, b1, w2, b2):
        out, pre1, pre2 = group_mlp(inp, w1, b1, w2, b2, keep=keep)
        return (inp, pre1, None, pre2), out
    pre1 = inp @ w1.T
    act1 = bias_silu_dropout(pre1, b1)  # pre1 ← pre1 + b1
    pre2 = act1 @ w2.T
    return (inp, pre1, act1, pre2), bias_silu_dropout(pre2, b2)
