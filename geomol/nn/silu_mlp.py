"""Three-layer SiLU MLPs with dropout that keep only pre-activations and dropout masks for the backward pass.

GET's feed-forward block runs two MLPs on one input, each Linear → SiLU → Dropout → Linear → SiLU →
Dropout → Linear → Dropout (:class:`~geomol.nn.equivariant_ffn.EquivariantFFN`). Through plain autograd
every hidden layer leaves four [N, width] tensors for the backward pass: the pre-activation (for the
SiLU), the dropout mask, the dropped activation (for the next product) and the SiLU output it was
made from. :func:`paired_mlp3` keeps the pre-activations and the masks as booleans, and recomputes
SiLU × mask in the backward pass: under half the memory, the same gradients up to float summation order.
Products go through :func:`geomol.nn.dense.dense` (the faster of oneDNN and BLAS on float32 CPU tensors).

The masks are drawn in the order the layer-by-layer module draws them (first MLP's three, then the
second's), so a seeded training step gives the same dropout as :func:`~geomol.nn.dropout.fast_dropout`.
"""
from __future__ import annotations

from typing import Sequence

import torch

from geomol.nn.dense import dense, outer
from geomol.nn.dropout import keep_bits
from geomol.nn.fused_silu import bias_silu_dropout, silu_dropout_grad

__all__ = ["paired_mlp3"]

class _PairedMLP3(torch.autograd.Function):
    """y_m = D3(W3 D2(SiLU(W2 D1(SiLU(W1 x + b1)) + b2)) + b3) for the two MLPs m of one input ``x``.

    The products run without their biases; each bias, SiLU and dropout mask follows in one pass
    (:func:`~geomol.nn.fused_silu.bias_silu_dropout`), which leaves the pre-activation in the product's output."""

    @staticmethod
    def forward(ctx, x, scale, keeps, *params):
        ctx.set_materialize_grads(False)
        w1 = [params[0], params[6]]
        pre1 = dense(x, torch.cat(w1))  # [N, Σ width]: one product for both; the biases follow per MLP
        widths = [w.size(0) for w in w1]
        saved, outputs = [x, pre1], []
        for m, first in enumerate(pre1.split(widths, dim=1)):
            _, b1, w2, b2, w3, b3 = params[6 * m:6 * m + 6]
            k1, k2, k3 = keeps[3 * m:3 * m + 3]
            pre2 = dense(bias_silu_dropout(first, b1, k1, scale), w2)
            hidden = bias_silu_dropout(pre2, b2, k2, scale)
            outputs.append(bias_silu_dropout(dense(hidden, w3), b3, k3, scale, silu=False))
            saved.append(pre2)
        ctx.widths, ctx.scale, ctx.keeps = widths, scale, keeps
        ctx.save_for_backward(*saved, *params)
        return tuple(outputs)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        x, pre1, *rest = ctx.saved_tensors
        pre2s, params = rest[:2], rest[2:]
        scale, keeps, need = ctx.scale, ctx.keeps, ctx.needs_input_grad
        g_params: list[torch.Tensor | None] = [None] * 12
        g_first = torch.empty_like(pre1)  # both MLPs' first pre-activations' gradients, side by side
        for m, (first, pre2, grad, g_pre1) in enumerate(zip(pre1.split(ctx.widths, dim=1), pre2s, grads,
                                                            g_first.split(ctx.widths, dim=1))):
            if grad is None:
                g_pre1.zero_()
                continue
            _, _, w2, _, w3, _ = params[6 * m:6 * m + 6]
            k1, k2, k3 = keeps[3 * m:3 * m + 3]
            base = 3 + 6 * m  # index of this MLP's W1 in needs_input_grad
            g3 = grad if k3 is None else silu_dropout_grad(grad, None, k3, scale)
            # each hidden layer's gradient and its recomputed activation (a weight gradient's input) in one pass
            a2 = torch.empty_like(pre2) if need[base + 4] else None
            g_pre2 = dense(g3, w3.t())
            silu_dropout_grad(g_pre2, pre2, k2, scale, out=g_pre2, act_out=a2)
            g_params[6 * m + 4] = outer(g3, a2) if a2 is not None else None
            g_params[6 * m + 5] = g3.sum(0) if need[base + 5] else None
            a1 = first.new_empty(first.shape) if need[base + 2] else None
            silu_dropout_grad(dense(g_pre2, w2.t()), first, k1, scale, out=g_pre1, act_out=a1)
            g_params[6 * m + 2] = outer(g_pre2, a1) if a1 is not None else None
            g_params[6 * m + 3] = g_pre2.sum(0) if need[base + 3] else None
        g_x = dense(g_first, torch.cat([params[0], params[6]]).t()) if need[0] else None
        for m, g in enumerate(g_first.split(ctx.widths, dim=1)):
            base = 3 + 6 * m
            g_params[6 * m] = outer(g, x) if need[base] else None
            g_params[6 * m + 1] = g.sum(0) if need[base + 1] else None
        return (g_x, None, None, *g_params)


def paired_mlp3(x: torch.Tensor, mlps: Sequence[torch.nn.Sequential], p: float,
                training: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Both three-layer MLPs (:func:`~geomol.nn.equivariant_ffn._mlp3` layout: Linear keys 0, 3, 6) on ``x``
    [N, d_in], differentiable (first derivatives), keeping only pre-activations and boolean masks.

    Args:
        x: [N, d_in] input of both MLPs.
        mlps: the two ``nn.Sequential`` MLPs.
        p: dropout probability (masks drawn only when ``training`` and p > 0).
        training: draw dropout masks.

    Returns: the two outputs, [N, d_out_m] each.
    """
    linears = [mlp[k] for mlp in mlps for k in (0, 3, 6)]
    params = [t for layer in linears for t in (layer.weight, layer.bias)]
    keeps, scale = [None] * 6, 1.0
    if training and p > 0.0:
        shapes = [(x.size(0), layer.out_features) for layer in linears]
        drawn = [keep_bits(shape, p, x.device) for shape in shapes]
        keeps, scale = [keep for keep, _ in drawn], drawn[0][1]
    return _PairedMLP3.apply(x, scale, keeps, *params)
