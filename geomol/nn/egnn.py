"""E(n)-equivariant message passing with a velocity term (the layer of EGNO, ``specs/EGNO.md`` §2.4).

For every directed edge (i = receiver ``row``, j = sender ``col``) and every time slice t:

    r_ij  = x_i − x_j,   s_ij = ‖r_ij‖²
    m_ij  = SiLU(W₂ SiLU(W₁ [s_ij, h_i, h_j, e_ij] + b₁) + b₂)
    x_i  ← x_i + φ_v(h_i) v_i + clamp(mean_j r_ij φ_x(m_ij), ±100)
    h_i  ← φ_h([h_i, Σ_j m_ij])

These things make it faster than the literal form while computing the same function:

* On the CPU, with H whole 64-byte vectors (float32: 16, 32, 64 or 128 channels), the edge MLPs run as one
  compiled loop from the gathers to the scatter-adds (:mod:`geomol.nn.egnn_compiled`); the chunked PyTorch
  passes described next are the formulation it is tested against and the fallback (no C++ compiler,
  ``GEOMOL_NATIVE=0``, autocast, other widths, CUDA).

* The first message Linear is split by input block, W₁[s, h_i, h_j, e] = w_s s + (W_i h)_i +
  (W_j h)_j + W_e e, so the H×H products run once per node (and W_e e once per edge, shared by
  all slices) instead of once per (edge, slice) on a 1+2H+E wide concatenation.
* Slices are a tensor axis, ``[N, P, ·]``: one gather ``h[row]`` fetches all P slices of a node,
  so the edge list is never replicated P times.
* Edges are processed in cache-sized chunks (:data:`CHUNK_ELEMENTS`), forward and backward: the
  per-edge MLPs have a hand-written backward pass (:func:`edge_sums`), so no per-edge autograd graph is
  built, and their activations are stored (or, on large graphs, recomputed) chunk by chunk.
* Float32 products on the CPU take the faster of oneDNN's Linear kernel and BLAS on this machine
  (:mod:`geomol.nn.dense`); on oneDNN the node-level maps of h share one backward product.

Parameters keep the official shapes and column orders (W₁ is [H, 1 + 2H + E]), so official
checkpoints load without reshaping.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
import torch.nn.functional as F

from geomol.nn.dense import dense, linear, linears, outer
from geomol.nn.egnn_compiled import fused_edge_sums, fused_supported

__all__ = ["EGNNLayer", "EdgeWeights", "edge_sums", "in_degree", "CHUNK_ELEMENTS"]

# Edges are processed in chunks of about this many elements per [edges, P, H] tensor (512 KB in float32):
# the activations of a chunk stay in the L2 cache, which makes the element-wise passes (SiLU, gathers,
# sums) several times cheaper than on whole-graph tensors (measured best of 2^15 … 2^20 on N-body shapes).
# Small graphs are chunked too: N-body (2,000 edges, P = 5) fwd+bwd 77 → 67 ms a step and forward 31 → 21 ms
# against one chunk, Mocap 198 → 179 ms, a 100-node radius graph 56 → 44 ms (alternated in one process).
CHUNK_ELEMENTS = 1 << 17


# ------------------------------------------------------------------------------------------ edge messages
def in_degree(row: torch.Tensor, num_nodes: int, dtype: torch.dtype) -> torch.Tensor:
    """[N, 1, 1] number of edges received by each node, clamped to ≥ 1 (for the mean of forces)."""
    deg = torch.bincount(row, minlength=num_nodes).clamp_(min=1)
    return deg.to(dtype).view(-1, 1, 1)


class EdgeWeights(NamedTuple):
    """Parameters of the per-edge MLPs after the node and edge-feature terms of the first Linear.

    m = SiLU(w2 SiLU(pre) + b2) with pre = (node terms) + (edge term) + s·w_s, and the force weight
    φ_x(m) = wo SiLU(wc m + bc) + bo. Shapes: w_s [H]; w2, wc [H, H]; b2, bc [H]; wo [1, H]; bo [1].
    """

    w_s: torch.Tensor
    w2: torch.Tensor
    b2: torch.Tensor
    wc: torch.Tensor
    bc: torch.Tensor
    wo: torch.Tensor
    bo: torch.Tensor


def _relative(x: torch.Tensor, row: torch.Tensor, col: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """r = x_row − x_col [c, P, 3] and s = ‖r‖² [c, P, 1] of a chunk of edges."""
    r = x.index_select(0, row).sub_(x.index_select(0, col))
    return r, (r * r).sum(-1, keepdim=True)


def _first_linear(h_row, h_col, edge_term, s, w_s, row, col) -> torch.Tensor:
    """[c, P, H] output of the first message Linear: (W_i h)_row + (W_j h)_col + (W_e e + b₁) + s·w_s."""
    pre = h_row.index_select(0, row)
    pre += h_col.index_select(0, col)
    pre += edge_term.unsqueeze(1)
    return pre.addcmul_(s, w_s)


def _chunk_forward(x, h_row, h_col, edge_term, row, col, w: EdgeWeights, keep: bool):
    """Forward pass of one chunk of c edges.

    Returns:
        r [c, P, 3], m [c, P, H], the force weight φ_x(m) [c, P, 1] and, if ``keep``, what the backward pass
        needs: the three pre-activations (pre, z2, z3) [c, P, H] and the force weight (else None: the activations
        are then computed in place). The activations themselves are recomputed from their pre-activations in
        the backward pass: a SiLU of a chunk costs less than writing it to memory and reading it back.
    """
    r, s = _relative(x, row, col)
    pre = _first_linear(h_row, h_col, edge_term, s, w.w_s, row, col)
    z2 = dense(F.silu(pre, inplace=not keep), w.w2, w.b2)
    m = F.silu(z2, inplace=not keep)
    z3 = dense(m, w.wc, w.bc)
    weight = F.linear(F.silu(z3, inplace=not keep), w.wo, w.bo)
    return r, m, weight, (pre, z2, z3, weight) if keep else None


def _chunk_backward(x, h_row, h_col, edge_term, row, col, w: EdgeWeights, saved, g_force, g_agg, grads):
    """Backward pass of one chunk: accumulates into ``grads`` (zero-initialised gradients by input name)
    and returns the chunk's gradient of the edge term [c, H] (None when not needed).

    Args:
        saved: what :func:`_chunk_forward` kept; g_force [N, P, 3], g_agg [N, P, H]: gradients of the two
            outputs of :func:`edge_sums`.
    """
    pre, z2, z3, weight = saved
    flat = lambda t: t.view(-1, t.size(-1))  # noqa: E731
    r, s = _relative(x, row, col)
    g_f = g_force.index_select(0, row)
    g_weight = (g_f * r).sum(-1, keepdim=True)  # [c, P, 1]
    g_r = g_f.mul_(weight)
    if "wo" in grads:
        grads["wo"][0].addmv_(flat(F.silu(z3)).t(), g_weight.view(-1))
        grads["bo"] += g_weight.sum()
    g_z3 = torch.ops.aten.silu_backward(g_weight * w.wo, z3)
    if "wc" in grads:
        grads["wc"] += outer(g_z3, F.silu(z2))
        grads["bc"] += flat(g_z3).sum(0)
    g_m = dense(g_z3, w.wc.t()).add_(g_agg.index_select(0, row))
    g_z2 = torch.ops.aten.silu_backward(g_m, z2)
    if "w2" in grads:
        grads["w2"] += outer(g_z2, F.silu(pre))
        grads["b2"] += flat(g_z2).sum(0)
    g_pre = torch.ops.aten.silu_backward(dense(g_z2, w.w2.t()), pre)
    if "h_row" in grads:
        grads["h_row"].index_add_(0, row, g_pre)
    if "h_col" in grads:
        grads["h_col"].index_add_(0, col, g_pre)
    if "w_s" in grads:
        grads["w_s"].addmv_(flat(g_pre).t(), s.view(-1))
    if "x" in grads:
        g_r.addcmul_(r, torch.mv(flat(g_pre), w.w_s).view_as(s), value=2.0)
        grads["x"].index_add_(0, row, g_r).index_add_(0, col, g_r, alpha=-1.0)
    return g_pre.sum(1) if "edge_term" in grads else None


def _chunks(num_edges: int, chunk: int) -> list[slice]:
    """Consecutive edge ranges of at most ``chunk`` edges."""
    return [slice(begin, begin + chunk) for begin in range(0, num_edges, chunk)]


def _forward_sums(x, h_row, h_col, edge_term, row, col, w: EdgeWeights, chunk: int, keep: bool = False):
    """Σ_j r_ij φ_x(m_ij) [N, P, 3], Σ_j m_ij [N, P, H] and the list of what each chunk kept for the backward
    pass (:func:`_chunk_forward`; None entries unless ``keep``), computed chunk by chunk."""
    force, agg, kept = torch.zeros_like(x), torch.zeros_like(h_row), []
    for sl in _chunks(row.numel(), chunk):
        r, m, weight, saved = _chunk_forward(x, h_row, h_col, edge_term[sl], row[sl], col[sl], w, keep)
        agg.index_add_(0, row[sl], m)
        force.index_add_(0, row[sl], r.mul_(weight))
        kept.append(saved)
    return force, agg, kept


class _EdgeSums(torch.autograd.Function):
    """:func:`edge_sums` with a hand-written, chunked backward pass (no autograd graph over the edges)."""

    @staticmethod
    def forward(ctx, x, h_row, h_col, edge_term, row, col, chunk, store, *weights):
        w = EdgeWeights(*weights)
        force, agg, kept = _forward_sums(x, h_row, h_col, edge_term, row, col, w, chunk, store)
        ctx.chunk, ctx.store = chunk, store
        ctx.save_for_backward(x, h_row, h_col, edge_term, row, col, *weights,
                              *(t for saved in kept if saved is not None for t in saved))
        return force, agg

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_force, g_agg):
        x, h_row, h_col, edge_term, row, col, *rest = ctx.saved_tensors
        n = len(EdgeWeights._fields)
        w, kept = EdgeWeights(*rest[:n]), rest[n:]
        names = ("x", "h_row", "h_col", "edge_term", None, None, None, None) + EdgeWeights._fields
        inputs = (x, h_row, h_col, edge_term, None, None, None, None) + tuple(w)
        grads = {name: torch.zeros_like(t) for name, t, needed in zip(names, inputs, ctx.needs_input_grad)
                 if needed}
        g_force, g_agg = g_force.contiguous(), g_agg.contiguous()
        chunks = _chunks(row.numel(), ctx.chunk)
        per_chunk = len(kept) // len(chunks) if chunks else 0  # tensors kept by each chunk's forward
        for i, sl in enumerate(chunks):
            args = (x, h_row, h_col, edge_term[sl], row[sl], col[sl], w)
            saved = kept[per_chunk * i:per_chunk * (i + 1)] if ctx.store else _chunk_forward(*args, keep=True)[3]
            g_edge = _chunk_backward(*args, saved, g_force, g_agg, grads)
            if g_edge is not None:
                grads["edge_term"][sl] = g_edge
        return tuple(grads.get(name) for name in names)


def edge_sums(x: torch.Tensor, h_row: torch.Tensor, h_col: torch.Tensor, edge_term: torch.Tensor,
              edge_index: torch.Tensor, weights: EdgeWeights, chunk: int = CHUNK_ELEMENTS,
              store_limit: int = 1 << 25) -> tuple[torch.Tensor, torch.Tensor]:
    """Messages of all edges, summed on their receivers: Σ_j r_ij φ_x(m_ij) [N, P, 3] and Σ_j m_ij [N, P, H].

    Args:
        x: [N, P, 3]; h_row, h_col: [N, P, H] node terms (W_i h) and (W_j h) of the first message Linear;
        edge_term: [M, H] W_e e + b₁; edge_index: [2, M] (row = receiver); weights: the edge MLPs.
        chunk: elements per [edges, P, H] chunk (edges are processed ⌈M·P·H / chunk⌉ at a time).
        store_limit: with gradients, the pre-activations of the edges ([M, P, H] ×3) are stored when
            M·P·H ≤ store_limit, else recomputed chunk by chunk in the backward pass (memory O(N·P·H + chunk)).

    Where :func:`~geomol.nn.egnn_compiled.fused_supported`, the compiled loop computes both sums and their
    gradients (it keeps two pre-activations per edge row when 2·M·P·H ≤ store_limit). Otherwise the backward
    pass is written by hand (:class:`_EdgeSums`), chunked like the forward pass, so that no per-edge autograd
    graph is built; under autocast the plain autograd formulation is used instead.
    """
    row, col = edge_index[0], edge_index[1]
    if not torch.is_autocast_enabled(x.device.type) and fused_supported(h_row, x, h_col, edge_term, *weights):
        return fused_edge_sums(x, h_row, h_col, edge_term, row, col, weights, store_limit)
    per_edge = h_row.size(1) * h_row.size(2)
    step = max(1, min(chunk, store_limit) // per_edge)
    tensors = (x, h_row, h_col, edge_term) + tuple(weights)
    if not torch.is_grad_enabled() or not any(t.requires_grad for t in tensors):
        return _forward_sums(x, h_row, h_col, edge_term, row, col, weights, step)[:2]
    if torch.is_autocast_enabled(x.device.type):
        return _autograd_sums(x, h_row, h_col, edge_term, row, col, weights)
    contiguous = [t.contiguous() for t in (x, h_row, h_col, edge_term)]
    return _EdgeSums.apply(*contiguous, row, col, step, row.numel() * per_edge <= store_limit, *weights)


def _autograd_sums(x, h_row, h_col, edge_term, row, col, w: EdgeWeights):
    """The same sums with ordinary autograd operations (mixed precision: every product in autocast's dtype)."""
    r = x.index_select(0, row) - x.index_select(0, col)
    pre = h_row.index_select(0, row) + h_col.index_select(0, col) + edge_term.unsqueeze(1)
    pre = pre + r.pow(2).sum(-1, keepdim=True) * w.w_s
    m = F.silu(F.linear(F.silu(pre), w.w2, w.b2))
    weight = F.linear(F.silu(F.linear(m, w.wc, w.bc)), w.wo, w.bo)
    force = torch.zeros_like(x).index_add_(0, row, (r * weight).to(x.dtype))
    return force, torch.zeros_like(h_row, dtype=m.dtype).index_add_(0, row, m)


class EGNNLayer(nn.Module):
    """One EGNN layer on P time slices at once.

    Args:
        hidden: H, width of h.
        edge_features: E, width of the fixed edge features.
        with_velocity: add the φ_v(h)·v term to the position update.
        coord_clamp: bound on each component of the aggregated force (official: 100).
        edge_chunk_elements: with gradients, above this many elements per [edges, P, H] tensor the edge
            activations are recomputed in the backward pass instead of being stored (same result, bounded memory).

    Shapes (N nodes, M edges, P slices):
        forward(x [N, P, 3], h [N, P, H], v [N, P, 3] or None, edge_index [2, M],
        edge_attr [M, E], degree [N, 1, 1]) → (x [N, P, 3], h [N, P, H]). v is not changed.
    """

    def __init__(self, hidden: int, edge_features: int, with_velocity: bool = True, coord_clamp: float = 100.0,
                 edge_chunk_elements: int = 1 << 23):
        super().__init__()
        self.hidden, self.edge_features, self.coord_clamp = hidden, edge_features, coord_clamp
        self.edge_chunk_elements = edge_chunk_elements
        self.message_in = nn.Linear(1 + 2 * hidden + edge_features, hidden)
        self.message_out = nn.Linear(hidden, hidden)
        self.coord_hidden = nn.Linear(hidden, hidden)
        self.coord_out = nn.Linear(hidden, 1)
        self.velocity_hidden = nn.Linear(hidden, hidden) if with_velocity else None
        self.velocity_out = nn.Linear(hidden, 1) if with_velocity else None
        self.node_hidden = nn.Linear(2 * hidden, hidden)
        self.node_out = nn.Linear(hidden, hidden)

    def edge_weights(self) -> EdgeWeights:
        """The edge-MLP parameters of the official-layout Linear layers (w_s copied: a strided column
        would make every broadcast with it several times slower)."""
        return EdgeWeights(self.message_in.weight[:, 0].contiguous(), self.message_out.weight,
                           self.message_out.bias, self.coord_hidden.weight, self.coord_hidden.bias,
                           self.coord_out.weight, self.coord_out.bias)

    def forward(self, x: torch.Tensor, h: torch.Tensor, v: torch.Tensor | None, edge_index: torch.Tensor,
                edge_attr: torch.Tensor, degree: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        H = self.hidden
        w = self.message_in.weight
        velocity = v is not None and self.velocity_hidden is not None
        # every H×H map of h in one call: message terms (W_i h), (W_j h), node-update term, velocity MLP
        heads = [w[:, 1:H + 1], w[:, H + 1:2 * H + 1], self.node_hidden.weight[:, :H]]
        biases = [None, None, self.node_hidden.bias]
        if velocity:
            heads.append(self.velocity_hidden.weight), biases.append(self.velocity_hidden.bias)
        h_row, h_col, hidden, *speed = linears(h, heads, biases)
        edge_term = F.linear(edge_attr, w[:, 2 * H + 1:], self.message_in.bias)
        force, aggregated = edge_sums(x, h_row, h_col, edge_term, edge_index, self.edge_weights(),
                                      store_limit=self.edge_chunk_elements)
        force = (force / degree).clamp(-self.coord_clamp, self.coord_clamp)
        x = x + self.velocity_out(F.silu(speed[0])) * v + force if velocity else x + force
        hidden = hidden + linear(aggregated, self.node_hidden.weight[:, H:])
        return x, linear(F.silu(hidden), self.node_out.weight, self.node_out.bias)
