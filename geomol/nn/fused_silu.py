"""Bias, SiLU and inverted dropout as one element-wise pass, and their gradient as one pass, for hand-written
backward passes (GET's feed-forward block, :mod:`geomol.nn.silu_mlp`, and its attention's group MLPs).

Between two products of an MLP, PyTorch runs the bias, the SiLU and dropout as three or four passes over the
activations, and its SiLU alone costs several times the arithmetic (a libm-accurate exponential per element: ~80 µs
for 504 × 256 float32 values here, against ~15 µs for a product's worth of memory traffic). The compiled loops of
``silu_rows.cpp`` do each direction in one pass (float32 vectorised; float64 for checks). Without the compiled
library, with autograd recording, or for tensors it cannot take, the same functions run as PyTorch operations.

Both functions take [rows, n] tensors whose rows are contiguous (any row stride: a column slice of a wider product
works) and boolean ``keep`` masks of shape [rows, n].
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from geomol.nn import native

__all__ = ["bias_silu_dropout", "silu_dropout_grad"]

_FLOATS = {torch.float32, torch.float64}


def _rows_ready(first: torch.Tensor, *others: torch.Tensor | None, bias: torch.Tensor | None = None) -> bool:
    """Whether the compiled passes can take the [rows, n] tensors ``first`` and ``others`` (bool masks among them)
    and ``bias`` [n]: CPU, ``first``'s float dtype, rows contiguous, no autograd recording."""
    dtype, recording = first.dtype, torch.is_grad_enabled()
    if dtype not in _FLOATS:
        return False
    for t in (first, *others):
        if t is not None and (t.dim() != 2 or t.stride(-1) != 1 or t.is_cuda or (recording and t.requires_grad)
                              or t.dtype not in (dtype, torch.bool)):
            return False
    if bias is not None and (bias.dim() != 1 or not bias.is_contiguous() or bias.dtype != dtype or bias.is_cuda
                             or (recording and bias.requires_grad)):
        return False
    return native.native_available()


def bias_silu_dropout(x: torch.Tensor, bias: torch.Tensor | None = None, keep: torch.Tensor | None = None,
                      scale: float = 1.0, silu: bool = True) -> torch.Tensor:
    """dropout(SiLU(x + bias)) as a new [rows, n] tensor; with ``bias`` [n], ``x`` [rows, n] (a product's output the
    caller owns) is overwritten by x + bias, the pre-activation a backward pass needs.

    Args:
        x: [rows, n] input (rows contiguous).
        bias: [n] or None.
        keep: [rows, n] bool dropout mask (True: kept, scaled by ``scale``) or None (no dropout).
        scale: factor of kept values (1 / (1 − p)).
        silu: False for the identity instead of the SiLU (bias and dropout only).
    """
    keep = None if keep is None else keep.contiguous()
    if _rows_ready(x, keep, bias=bias):
        out = torch.empty(x.shape, dtype=x.dtype)
        factor = None if keep is None else native.constant(scale, x.dtype)
        native.split_typed("geomol_silu_rows", x.size(0), x.dtype, x.size(1), x, x.stride(0), bias, int(silu), keep,
                           factor, out, out.size(1))
        return out
    pre = x if bias is None else x.add_(bias)
    out = F.silu(pre) if silu else pre.clone()
    return out if keep is None else out.mul_(keep).mul_(scale)


def silu_dropout_grad(grad: torch.Tensor, pre: torch.Tensor | None, keep: torch.Tensor | None = None,
                      scale: float = 1.0, out: torch.Tensor | None = None,
                      act_out: torch.Tensor | None = None) -> torch.Tensor:
    """The gradient [rows, n] with respect to ``pre`` of dropout(SiLU(pre)), given ``grad`` [rows, n] of its output
    (``pre`` None: of dropout alone), written to ``out`` ([rows, n], e.g. a column slice of a wider tensor, or
    ``grad`` itself) or a new tensor, and returned. ``act_out`` ([rows, n], needs ``pre``): where to write
    dropout(SiLU(pre)) as well (what :func:`bias_silu_dropout` gives), from the same pass."""
    for name, given in (("out", out), ("act_out", act_out)):
        if given is not None and given.shape != grad.shape:
            raise ValueError(f"silu_dropout_grad: {name} has shape {tuple(given.shape)}, the gradient "
                             f"{tuple(grad.shape)}")
    if act_out is not None and pre is None:
        raise ValueError("silu_dropout_grad: act_out needs the pre-activation")
    keep = None if keep is None else keep.contiguous()
    if _rows_ready(grad, pre, keep, out, act_out):
        out = torch.empty(grad.shape, dtype=grad.dtype) if out is None else out
        factor = None if keep is None else native.constant(scale, grad.dtype)
        native.split_typed("geomol_silu_grad_rows", grad.size(0), grad.dtype, grad.size(1), grad, grad.stride(0),
                           pre, 0 if pre is None else pre.stride(0), keep, factor, out, out.stride(0), act_out,
                           0 if act_out is None else act_out.stride(0))
        return out
    if act_out is not None:
        act_out.copy_(bias_silu_dropout(pre, None, keep, scale))
    dropped = grad if keep is None else grad.mul(keep).mul_(scale)
    if pre is not None:
        result = torch.ops.aten.silu_backward(dropped, pre)
    else:
        result = dropped.clone() if keep is None else dropped  # always a new tensor
    return result if out is None else out.copy_(result)
