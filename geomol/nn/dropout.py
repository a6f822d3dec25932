"""Dropout with a cheaper random mask (GET's feed-forward blocks drop millions of activations a step).

``torch.nn.functional.dropout`` draws one Bernoulli sample per element; on CPU that costs more
than the matmul it follows. Here each 64-bit random word gives four 15-bit uniform integers,
compared with a threshold: the mask costs a quarter of the draws. The drop probability is
rounded to a multiple of 2⁻¹⁵ (0.1 → 0.100006), and kept activations are scaled by
1 / (1 − that probability), so the expectation is exact.

On CPU with geomol's compiled library the words come from SplitMix64 (a counter-based generator,
vectorised, drawing and comparing in one pass: :func:`geomol.nn.native.keep_bits`) seeded by one
draw from torch's generator, so ``torch.manual_seed`` fixes the masks; elsewhere from torch's
``random_()`` (the same distribution, other bits).
"""
from __future__ import annotations

import torch
from torch import nn

from geomol.nn import native

__all__ = ["FastDropout", "fast_dropout", "keep_bits", "keep_mask"]

_LEVELS = 1 << 15


def keep_bits(shape: torch.Size | tuple[int, ...], p: float, device: torch.device) -> tuple[torch.Tensor, float]:
    """``(keep, scale)``: a boolean ``shape`` mask, False with probability ≈ p, and 1 / (1 − that probability)."""
    threshold = round(p * _LEVELS)
    scale = _LEVELS / (_LEVELS - threshold)
    # random_() on int64 is uniform on [0, 2⁶³): a seed, or words whose 16-bit parts have 15 uniform low bits
    if torch.device(device).type == "cpu" and native.native_available():
        keep = torch.empty(shape, dtype=torch.bool)
        native.keep_bits(keep, int(torch.empty((), dtype=torch.int64).random_()), threshold)
        return keep, scale
    n = 1
    for size in shape:
        n *= size
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_()
    bits = words.view(torch.int16)[:n].view(shape).bitwise_and_(_LEVELS - 1)
    return bits >= threshold, scale


def keep_mask(shape: torch.Size, p: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A ``shape`` tensor of 0 (dropped, probability ≈ p) and 1 / (1 − p) (kept)."""
    keep, scale = keep_bits(shape, p, device)
    return keep.to(dtype).mul_(scale)


def fast_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout of ``x`` (any shape); the identity when not training or p = 0."""
    if not training or p == 0.0:
        return x
    if p >= 1.0:
        return torch.zeros_like(x)
    return x * keep_mask(x.shape, p, x.dtype, x.device)


class FastDropout(nn.Module):
    """Drop-in for ``nn.Dropout(p)`` using :func:`fast_dropout` (no parameters, no state)."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fast_dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
