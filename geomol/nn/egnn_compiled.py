""":func:`geomol.nn.egnn.edge_sums` as one compiled loop over the edges (``egnn_edges.cpp``).

In eager PyTorch a chunk of c edges costs some fifteen passes over [c, P, H] tensors (gathers, sums, SiLUs, the
scatter-adds) around four BLAS products. The compiled loop takes six (edge, slice) rows at a time through the
whole edge MLP (its products register-blocked: the accumulators stay in vector registers, at about BLAS's speed
on these shapes) and adds the results straight onto the nodes. The backward pass recomputes a block of rows,
or reads the two inner pre-activations the forward pass kept (when they fit the store limit), then runs the
chain rule down to every input. Work is split over ``torch.get_num_threads()`` threads by ranges of edges
(:func:`geomol.nn.native.run_edge_ranges`), each with its own node accumulators. Results equal the PyTorch
formulation's up to float32 rounding (float64: 1e-12).
"""
from __future__ import annotations

import torch

from geomol.nn.native import _SUFFIX, count_products, native_ready, run_edge_ranges

__all__ = ["fused_supported", "fused_edge_sums"]

_WIDTHS = (1, 2, 4, 8)  # vectors of 64 bytes per row of H channels the compiled loop is built for


def fused_supported(h_row: torch.Tensor, *tensors: torch.Tensor) -> bool:
    """Whether the compiled loop takes these inputs: CPU float32 or float64 alike, H a supported width (float32:
    16, 32, 64 or 128 channels; float64: 8 … 64) and the library available."""
    lanes = 64 // h_row.element_size()
    H = h_row.size(-1)
    return H % lanes == 0 and H // lanes in _WIDTHS and native_ready(h_row, *tensors)


def _forward(inputs: tuple, weights, kept: list | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The two sums; ``kept``: two [M, P, H] tensors the loop writes the pre-activations of m and a3 into."""
    x, h_row, h_col, edge_term, row, col = inputs
    (n_edges,), (_, P, H) = row.shape, h_row.shape
    force, agg = torch.zeros_like(x), torch.zeros_like(h_row)
    arguments = [P, H, x, h_row, h_col, edge_term, row, col, *_weights(weights)[:7], agg, force, *(kept or [None] * 2)]
    run_edge_ranges(f"geomol_egnn_fused_forward_{_SUFFIX[x.dtype]}", n_edges, P * H, arguments, [agg, force])
    _count(n_edges * P, H, products=2)
    return force, agg


def _count(rows: int, H: int, products: int) -> None:
    """Report ``products`` H×H matrix-vector products (or weight-gradient outer products) per edge row to
    :func:`geomol.nn.native.counting_products`, plus the force weight's dot product."""
    count_products(rows * (products * 2 * H * H + 2 * H))


def _weights(weights) -> list[torch.Tensor]:
    """The C order: w_s, W2ᵀ, b2, Wcᵀ, bc, wo, bo, W2, Wc (contiguous)."""
    w_s, w2, b2, wc, bc, wo, bo = (t.detach() for t in weights)
    return [t.contiguous() for t in (w_s, w2.t(), b2, wc.t(), bc, wo.reshape(-1), bo, w2, wc)]


class _FusedEdgeSums(torch.autograd.Function):
    """:func:`fused_edge_sums` with gradients: the compiled backward loop, first derivatives only."""

    @staticmethod
    def forward(ctx, x, h_row, h_col, edge_term, row, col, store, *weights):
        kept = [h_row.new_empty(row.numel(), *h_row.shape[1:]) for _ in range(2)] if store else []
        ctx.save_for_backward(x, h_row, h_col, edge_term, row, col, *weights, *kept)
        return _forward((x, h_row, h_col, edge_term, row, col), weights, kept)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_force, g_agg):
        x, h_row, h_col, edge_term, row, col, *weights = ctx.saved_tensors
        weights, kept = weights[:7], weights[7:]
        (n_edges,), (_, P, H) = row.shape, h_row.shape
        node_grads = [torch.zeros_like(t) for t in (h_row, h_col, x)]
        weight_grads = [torch.zeros_like(t) for t in weights]  # w_s, w2, b2, wc, bc, wo, bo
        g_edge = torch.zeros_like(edge_term) if ctx.needs_input_grad[3] else None
        arguments = [P, H, x, h_row, h_col, edge_term, row, col, *_weights(weights), g_force.contiguous(),
                     g_agg.contiguous(), *node_grads, g_edge, *weight_grads, *(kept or [None] * 2)]
        run_edge_ranges(f"geomol_egnn_fused_backward_{_SUFFIX[x.dtype]}", n_edges, P * H, arguments,
                        node_grads + weight_grads)  # (g_edge: each edge's rows lie in one range)
        _count(n_edges * P, H, products=4 if kept else 6)  # (recomputing the forward pass's two when not kept)
        g_h_row, g_h_col, g_x = node_grads
        grads = (g_x, g_h_row, g_h_col, g_edge, None, None, None, *weight_grads)
        return tuple(g if needed else None for g, needed in zip(grads, ctx.needs_input_grad))


def _check_nodes(row: torch.Tensor, col: torch.Tensor, n_nodes: int) -> None:
    """IndexError for an edge whose node is not in 0 … n_nodes − 1 (the compiled loop does not check its reads)."""
    if row.numel() and (min(row.min(), col.min()) < 0 or max(row.max(), col.max()) >= n_nodes):
        raise IndexError(f"edge_index refers to nodes outside 0 … {n_nodes - 1}")


def fused_edge_sums(x: torch.Tensor, h_row: torch.Tensor, h_col: torch.Tensor, edge_term: torch.Tensor,
                    row: torch.Tensor, col: torch.Tensor, weights, store_limit: int = 1 << 25
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Σ_j r_ij φ_x(m_ij) [N, P, 3] and Σ_j m_ij [N, P, H], compiled (arguments as
    :func:`geomol.nn.egnn.edge_sums`, row and col [M] the receivers and senders; call :func:`fused_supported`
    first). Differentiable with respect to every floating input. With gradients, two pre-activations per edge row
    ([M, P, H] ×2) are kept for the backward pass when 2·M·P·H ≤ ``store_limit`` (it then skips two of its four
    products), else it recomputes them."""
    inputs = [t.contiguous() for t in (x, h_row, h_col, edge_term, row.long(), col.long())]  # (the loop reads int64)
    _check_nodes(inputs[4], inputs[5], x.size(0))
    weights = [t.contiguous() for t in weights]
    if torch.is_grad_enabled() and any(t.requires_grad for t in (*inputs[:4], *weights)):
        store = 2 * row.numel() * h_row.size(1) * h_row.size(2) <= store_limit
        return _FusedEdgeSums.apply(*inputs, store, *weights)
    return _forward(tuple(inputs), weights)
