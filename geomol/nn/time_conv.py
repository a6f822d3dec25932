"""Driver of ``time_conv.cpp``: EGNO's scalar temporal convolution h + LeakyReLU(spectral_conv(h)) with compiled
passes around its channel mixing and a hand-written backward pass.

:class:`~geomol.nn.temporal.ScalarTimeConv` runs :func:`residual_time_conv` where it can (CPU, float32 or float64,
the compiled library, outside autocast) and :func:`~geomol.nn.temporal.spectral_time_conv` under autograd
otherwise; both compute the same function. The analysis onto the Fourier coefficients and the synthesis with the
activation and the residual are one pass each way over a node's rows; the mixing of each mode is one or two BLAS
products on contiguous [N, C] blocks. Only the coefficients and the mixed coefficients ([J, N, C] each) are kept for
the backward pass, which recomputes the pre-activation's sign from them (first derivatives only).
"""
from __future__ import annotations

import torch

from geomol.nn import native

__all__ = ["residual_time_conv", "residual_time_conv_ready"]


def residual_time_conv_ready(h: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :func:`residual_time_conv` can take these: CPU tensors of one float dtype, outside autocast."""
    return (h.dim() == 3 and not torch.is_autocast_enabled(h.device.type)
            and native.native_ready(h, weight))


def _mix(coef: torch.Tensor, blocks: torch.Tensor, modes: tuple, num_slices: int) -> torch.Tensor:
    """Y_k = U_k W_k per mode in real form: coef [J, N, C_in] → [J, N, C_out] (see ``temporal._mode_mixing``);
    blocks [K, 2, C_in, C_out]: the weight's real and imaginary matrices, contiguous."""
    J, N, _ = coef.shape
    mixed = coef.new_empty(J, N, blocks.size(3))
    j = 0
    for k in modes:
        w_re, w_im = blocks[k]
        if 0 < 2 * k < num_slices:  # (Re U + i Im U)(Re W + i Im W)
            torch.mm(coef[j], w_re, out=mixed[j]).addmm_(coef[j + 1], w_im, alpha=-1)
            torch.mm(coef[j], w_im, out=mixed[j + 1]).addmm_(coef[j + 1], w_re)
            j += 2
        else:
            torch.mm(coef[j], w_re, out=mixed[j])
            j += 1
    return mixed


def _mix_backward(coef: torch.Tensor, blocks: torch.Tensor, g_mixed: torch.Tensor, modes: tuple,
                  num_slices: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of :func:`_mix` with respect to coef [J, N, C_in] and blocks [K, 2, C_in, C_out]."""
    g_coef, g_blocks = torch.empty_like(coef), torch.zeros_like(blocks)
    j = 0
    for k in modes:
        w_re, w_im = blocks[k]
        if 0 < 2 * k < num_slices:
            g_re, g_im = g_mixed[j], g_mixed[j + 1]
            torch.mm(g_re, w_re.t(), out=g_coef[j]).addmm_(g_im, w_im.t())
            torch.mm(g_im, w_re.t(), out=g_coef[j + 1]).addmm_(g_re, w_im.t(), alpha=-1)
            torch.mm(coef[j].t(), g_re, out=g_blocks[k, 0]).addmm_(coef[j + 1].t(), g_im)
            torch.mm(coef[j].t(), g_im, out=g_blocks[k, 1]).addmm_(coef[j + 1].t(), g_re, alpha=-1)
            j += 2
        else:
            torch.mm(g_mixed[j], w_re.t(), out=g_coef[j])
            torch.mm(coef[j].t(), g_mixed[j], out=g_blocks[k, 0])
            j += 1
    return g_coef, g_blocks


class _ResidualTimeConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, tables, negative_slope):
        N, P, C = h.shape
        h = h.contiguous()
        analysis, synthesis, modes = tables
        J = analysis.size(0)
        slope = native.constant(negative_slope, h.dtype)
        coef = h.new_empty(J, N, C)
        native.split_typed("geomol_time_analysis", N, h.dtype, N, P, C, J, analysis, h, coef)
        blocks = weight.permute(2, 3, 0, 1).contiguous()  # [K, 2, C_in, C_out]
        mixed = _mix(coef, blocks, modes, P)
        out = torch.empty(N, P, mixed.size(2), dtype=h.dtype)
        native.split_typed("geomol_time_synthesis", N, h.dtype, N, P, mixed.size(2), J, synthesis, mixed, h, slope,
                           out)
        ctx.tables = tables
        ctx.save_for_backward(coef, mixed, blocks, slope)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_out):
        coef, mixed, blocks, slope = ctx.saved_tensors
        J, N, C = coef.shape
        P = g_out.size(1)
        analysis, synthesis, modes = ctx.tables
        g_out = g_out.contiguous()
        g_mixed = torch.empty_like(mixed)
        native.split_typed("geomol_time_synthesis_backward", N, coef.dtype, N, P, mixed.size(2), J, synthesis, mixed,
                           slope, g_out, g_mixed)
        g_coef, g_blocks = _mix_backward(coef, blocks, g_mixed, modes, P)
        g_h = torch.empty(N, P, C, dtype=coef.dtype)
        native.split_typed("geomol_time_analysis_backward", N, coef.dtype, N, P, C, J, analysis, g_coef, g_out, g_h)
        return g_h, g_blocks.permute(2, 3, 0, 1).contiguous(), None, None


def residual_time_conv(h: torch.Tensor, weight: torch.Tensor, tables: tuple, negative_slope: float = 0.01
                       ) -> torch.Tensor:
    """h + LeakyReLU(spectral_conv(h)) (:class:`~geomol.nn.temporal.ScalarTimeConv`), compiled around the mixing.

    Args:
        h: [N, P, C] (C_in = C_out = C: the residual needs equal widths).
        weight: [C, C, K, 2] official spectral weight (real, imaginary).
        tables: (analysis [J, P], synthesis [P, J], modes) of ``temporal._fourier_tables`` for h's dtype and P.
        negative_slope: the LeakyReLU's slope below zero.

    Returns: [N, P, C]; differentiable (first derivatives) in h and weight.
    """
    return _ResidualTimeConv.apply(h, weight, tables, negative_slope)
