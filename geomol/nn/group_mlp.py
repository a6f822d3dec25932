"""Driver of ``group_mlp.cpp``: GET's group MLPs, SiLU(W2 SiLU(W1 x + b1) + b2) on a chunk's group rows, compiled.

:func:`~geomol.nn.attend.mlp2_forward` and :func:`~geomol.nn.attend_backward.mlp2_backward` run
these where they can (CPU, float32 or float64, no autograd recording) and are their PyTorch formulation otherwise.
The compiled loop takes six rows at a time through both layers with the accumulators in registers; the thin
products (32 inputs, 64 hidden units) ran at under half the machine's speed through BLAS, each followed by
separate passes for the bias and the SiLU. The backward pass adds each block's share of the weight gradients while
its rows are in registers, instead of writing three [g, 64] intermediates for BLAS to read back.
"""
from __future__ import annotations

import torch

from geomol.nn import native

__all__ = ["group_mlp_ready", "group_mlp", "group_mlp_backward"]

MIN_ROWS_PER_THREAD = 256
"""Rows are split over threads only in ranges of at least this many."""


def group_mlp_ready(x: torch.Tensor, *weights: torch.Tensor) -> bool:
    """Whether the compiled loops can take these: CPU tensors of one float dtype, no autograd recording."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, *weights)):
        return False
    return x.dim() == 2 and native.native_ready(x, *weights)


def _rows_contiguous(t: torch.Tensor) -> torch.Tensor:
    """``t`` [g, K] if its rows are contiguous (any row stride), else a contiguous copy."""
    return t if t.stride(1) == 1 and t.stride(0) >= t.size(1) else t.contiguous()


def _run(name: str, x: torch.Tensor, arguments: list, accumulate=()) -> None:
    rows = x.size(0)
    threads = min(torch.get_num_threads(), max(1, rows // MIN_ROWS_PER_THREAD))
    native._run_ranges(f"{name}_{native._SUFFIX[x.dtype]}", native._equal_ranges(rows, threads), arguments,
                       "invalid sizes", accumulate)


def group_mlp(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor,
              keep: bool = False) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(y, pre1, pre2): y [g, O] = SiLU(W2 SiLU(W1 x + b1) + b2) for x [g, K] (rows contiguous, any row stride),
    w1 [D, K], w2 [O, D] (nn.Linear layout); with ``keep``, also the pre-activations pre1 [g, D] and pre2 [g, O]
    (else None)."""
    x = _rows_contiguous(x)
    (rows, K), D, O = x.shape, w1.size(0), w2.size(0)
    y = x.new_empty(rows, O)
    pre1, pre2 = (x.new_empty(rows, D), x.new_empty(rows, O)) if keep else (None, None)
    w1t = native._derived_once(w1, "transposed", lambda w: w.T.contiguous())
    w2t = native._derived_once(w2, "transposed", lambda w: w.T.contiguous())
    _run("geomol_group_mlp", x, [K, D, O, x, x.stride(0), w1t, b1.contiguous(), w2t, w2.contiguous(), b2.contiguous(),
                                 y, pre1, pre2])
    native.count_products(2 * rows * (K * D + D * O))
    return y, pre1, pre2


def group_mlp_backward(g_y: torch.Tensor, x: torch.Tensor, pre1: torch.Tensor | None, pre2: torch.Tensor | None,
                       w1: torch.Tensor, w2: torch.Tensor, g_x: torch.Tensor | None = None,
                       b1: torch.Tensor | None = None, b2: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """Gradients (x, w1, b1, w2, b2) of :func:`group_mlp`'s y given g_y [g, O] and the kept pre-activations, all
    compiled (the weight gradients, sums over all rows, added block by block while the block's rows are at hand).
    With ``pre1`` and ``pre2`` None, each block's pre-activations are recomputed from x (``b1``, ``b2`` needed)
    instead of read. ``g_x``: where to write the gradient of x ([g, K], rows contiguous, any row stride; default a
    new tensor)."""
    x = _rows_contiguous(x)
    (rows, K), D, O = x.shape, w1.size(0), w2.size(0)
    recompute = pre1 is None
    if recompute != (pre2 is None) or (recompute and (b1 is None or b2 is None)):
        raise ValueError("group_mlp_backward: give both pre-activations, or neither and both biases")
    if recompute:
        forward = [native._derived_once(w1, "transposed", lambda w: w.T.contiguous()), b1.contiguous(),
                   native._derived_once(w2, "transposed", lambda w: w.T.contiguous()), b2.contiguous(), None, None]
    else:
        forward = [None, None, None, None, pre1.contiguous(), pre2.contiguous()]
    if g_x is None or g_x.shape != (rows, K) or g_x.stride(1) != 1:
        g_x = x.new_empty(rows, K)
    weight_grads = [x.new_zeros(D, K), x.new_zeros(D), x.new_zeros(O, D), x.new_zeros(O)]  # w1, b1, w2, b2
    _run("geomol_group_mlp_backward", x, [K, D, O, x, x.stride(0), *forward, w1.contiguous(), w2.contiguous(),
                                         g_y.contiguous(), g_x, g_x.stride(0), *weight_grads], accumulate=weight_grads)
    # the chain rule's two products and the two weight gradients (and the recomputed forward pass's two)
    native.count_products((6 if recompute else 4) * rows * (O * D + D * K))
    return (g_x, *weight_grads)
