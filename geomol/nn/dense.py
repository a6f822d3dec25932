"""Linear layers through the faster of two CPU kernels (same function as ``F.linear``).

Float32 products on the CPU can run through two kernels: the BLAS ``sgemm`` behind ``F.linear`` and oneDNN's
Linear kernel (the one ``torch.compile`` emits on CPU), which also fuses a following SiLU into its pass. Which
one is faster for the thin, tall shapes of graph networks (thousands of rows × 8–512 columns) depends on the
machine: on one AVX-512 machine oneDNN ran [9298, 256] × [256, 256] in 6.5 ms against 17.7 ms for
``F.linear``; on a Sapphire Rapids machine both take 6.6 ms there, and oneDNN is ~10 % slower on 2,048-row
chunks and needs a transposed copy for every weight gradient (EGNO N-body fwd+bwd 121 ms with oneDNN,
98 ms with BLAS). :func:`linear_kernel` therefore measures both once per process on such shapes and keeps
oneDNN only where it is clearly faster; ``GEOMOL_LINEAR_KERNEL=onednn|blas`` pins the choice.

* :func:`dense` — one product, no autograd (inference, and the hand-written backward passes);
* :func:`linear`, :func:`linears` — differentiable; on the oneDNN kernel the backward pass uses it too, and
  several maps of one input share their backward products;
* :func:`silu_linear` — SiLU(linear(x)), fused on oneDNN when no gradient is needed;
* :func:`outer` — the weight gradient Σ aᵀb.

Anything but float32 on the CPU (float64 checks, CUDA), or a torch without the oneDNN kernel, takes
``F.linear`` itself. Results equal ``F.linear``'s up to float32 summation order.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from geomol.errors import ConfigError
from geomol.timing import median_seconds

__all__ = ["dense", "linear", "linears", "silu_linear", "outer", "onednn_available", "linear_kernel",
           "set_linear_kernel", "KERNEL_ENV"]

KERNEL_ENV = "GEOMOL_LINEAR_KERNEL"
"""Environment variable pinning the float32 CPU kernel: ``auto`` (default: measured), ``onednn`` or ``blas``."""
KERNELS = ("auto", "onednn", "blas")


def _onednn_linear():
    """oneDNN's fused Linear operator, or None where this torch lacks it or it gives a wrong product."""
    try:
        op = torch.ops.mkldnn._linear_pointwise
        probe = op(torch.ones(2, 3), torch.ones(4, 3), torch.zeros(4), "none", [], "")
        return op if torch.equal(probe, torch.full((2, 4), 3.0)) else None
    except (AttributeError, RuntimeError):
        return None


_ONEDNN_LINEAR = _onednn_linear()


_chosen_kernel: str | None = None  # "onednn" or "blas" once decided


def set_linear_kernel(name: str = "auto") -> str:
    """Choose the float32 CPU kernel for this process: ``onednn``, ``blas``, or ``auto`` (measure both now,
    :func:`_measured_kernel`). ``onednn`` falls back to ``blas`` where this torch lacks the kernel.
    Returns the kernel now in use.

    Raises:
        ConfigError: any other name.
    """
    global _chosen_kernel
    if name not in KERNELS:
        raise ConfigError(f"linear kernel must be one of {', '.join(KERNELS)}, got {name!r}", source=KERNEL_ENV)
    if _ONEDNN_LINEAR is None:
        _chosen_kernel = "blas"
    else:
        _chosen_kernel = _measured_kernel() if name == "auto" else name
    return _chosen_kernel


def linear_kernel() -> str:
    """``"onednn"`` or ``"blas"``: the kernel float32 CPU products take in this process, decided on first use
    from ``$GEOMOL_LINEAR_KERNEL`` (:func:`set_linear_kernel`)."""
    return _chosen_kernel or set_linear_kernel(os.environ.get(KERNEL_ENV, "auto"))


def _measured_kernel(rows: int = 2048, width: int = 64, repeats: int = 15, margin: float = 0.9) -> str:
    """``"onednn"`` if its products of a chunk of graph-network rows (a Linear with bias, the same with a SiLU,
    a weight gradient: [rows, width] × [width, width]) take under ``margin`` × the BLAS time, else ``"blas"``.
    About 50 ms, once per process, at the calling thread count; the two kernels alternate so that load drift
    hits both alike."""
    gen = torch.Generator().manual_seed(0)
    x, g = torch.randn(rows, width, generator=gen), torch.randn(rows, width, generator=gen)
    w, b = torch.randn(width, width, generator=gen), torch.randn(width, generator=gen)

    def onednn():
        _ONEDNN_LINEAR(x, w, b, "none", [], ""), _ONEDNN_LINEAR(x, w, b, "swish", [], "")
        _ONEDNN_LINEAR(g.t(), x.t(), None, "none", [], "")

    def blas():
        F.linear(x, w, b), F.silu(F.linear(x, w, b)), torch.mm(g.t(), x)

    seconds = {"onednn": [], "blas": []}
    with torch.autocast("cpu", enabled=False), torch.no_grad():
        for _ in range(3):
            for name, fn in (("onednn", onednn), ("blas", blas)):
                fn()
                seconds[name].append(median_seconds(fn, repeats))
    return "onednn" if min(seconds["onednn"]) < margin * min(seconds["blas"]) else "blas"


def onednn_available() -> bool:
    """Whether float32 CPU products go through oneDNN: the kernel exists, ``torch.backends.mkldnn`` is on and
    :func:`linear_kernel` chose it."""
    return _ONEDNN_LINEAR is not None and torch.backends.mkldnn.enabled and linear_kernel() == "onednn"


def _uses_onednn(inp: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    return (inp.dtype == weight.dtype == torch.float32 and inp.device.type == "cpu"
            and (bias is None or bias.dtype == torch.float32) and onednn_available())


def _blas_layout(t: torch.Tensor) -> torch.Tensor:
    """``t`` if it is contiguous or a transposed contiguous matrix, else a contiguous copy: other strides
    (a column block of a weight, a slice of the last axis) send oneDNN down a slow reference path."""
    return t if t.is_contiguous() or (t.dim() == 2 and t.t().is_contiguous()) else t.contiguous()


def dense(inp: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
          activation: str | None = None) -> torch.Tensor:
    """inp [..., in] · weightᵀ (+ bias) → [..., out], weight [out, in], without autograd.

    ``activation="silu"`` applies SiLU to the result (fused into the product on the oneDNN path).
    """
    if _uses_onednn(inp, weight, bias):
        return _ONEDNN_LINEAR(_blas_layout(inp), _blas_layout(weight), bias,
                              "swish" if activation == "silu" else "none", [], "")
    out = F.linear(inp, weight, bias)
    return F.silu(out, inplace=True) if activation == "silu" else out


def outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Σ over rows of aᵀb: a [..., Ha], b [..., Hb] → [Ha, Hb] (the weight gradient of a Linear).

    oneDNN copies its first operand to row-major [H, rows]; that transposition is the costly part, so the
    narrower operand goes first. BLAS reads the transposed view as it is."""
    a, b = a.reshape(-1, a.size(-1)), b.reshape(-1, b.size(-1))
    if not _uses_onednn(a, b, None):
        return a.t() @ b
    return dense(a.t(), b.t()) if a.size(1) <= b.size(1) else dense(b.t(), a.t()).t()


class _Linears(torch.autograd.Function):
    """Linear maps of one input, y_k = x W_kᵀ + b_k, every product computed by :func:`dense`; the backward
    pass stacks the maps so that ∂x and the ∂W_k take one product each."""

    @staticmethod
    def forward(ctx, inp, *params):
        weights, biases = params[0::2], params[1::2]
        ctx.save_for_backward(inp, *weights)
        ctx.has_bias = [b is not None for b in biases]
        return tuple(dense(inp, w, b) for w, b in zip(weights, biases))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        inp, *weights = ctx.saved_tensors
        grad = torch.cat(grads, -1) if len(grads) > 1 else grads[0].contiguous()  # [..., Σ out_k]
        g_in = dense(grad, torch.cat(weights).t()) if ctx.needs_input_grad[0] else None
        sizes = [w.size(0) for w in weights]
        g_w = outer(grad, inp).split(sizes) if any(ctx.needs_input_grad[1::2]) else [None] * len(sizes)
        g_b = grad.reshape(-1, grad.size(-1)).sum(0).split(sizes) if any(ctx.has_bias) else [None] * len(sizes)
        return (g_in,) + tuple(t for k in range(len(sizes))
                               for t in (g_w[k], g_b[k] if ctx.has_bias[k] else None))


def linears(inp: torch.Tensor, weights: list[torch.Tensor],
            biases: list[torch.Tensor | None]) -> list[torch.Tensor]:
    """[``F.linear(inp, w, b)`` for each map], differentiable (first derivatives), with the products of
    :func:`dense`; several maps of one input share their backward products.

    Under autocast, or for other dtypes and devices, it is ``F.linear`` itself (which also supports
    higher derivatives)."""
    if not _uses_onednn(inp, weights[0], None) or torch.is_autocast_enabled("cpu"):
        return [F.linear(inp, w, b) for w, b in zip(weights, biases)]
    params = [t for pair in zip(weights, biases) for t in pair]
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in [inp] + params):
        return list(_Linears.apply(inp, *params))
    return [dense(inp, w, b) for w, b in zip(weights, biases)]


def linear(inp: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear`` with the products of :func:`dense` (see :func:`linears`)."""
    return linears(inp, [weight], [bias])[0]


def silu_linear(inp: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """SiLU(``F.linear(inp, weight, bias)``): one fused pass without autograd, :func:`linear` then SiLU with it."""
    if torch.is_grad_enabled():
        return F.silu(linear(inp, weight, bias))
    return dense(inp, weight, bias, activation="silu")
