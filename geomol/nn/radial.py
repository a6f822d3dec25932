"""Gaussian radial basis with a smooth polynomial cutoff envelope (GET, ``specs/GET.md`` §2.3).

``RadialBasis(n, cutoff)`` maps a distance d (any shape) to ``n`` features
``u(d / cutoff) · exp(γ (d / cutoff − μ_k)²)`` with centres μ_k = linspace(0, 1, n),
γ = −½ / (μ₁ − μ₀)² and the p = 5 polynomial envelope
``u(x) = 1 − 21 x⁵ + 35 x⁶ − 15 x⁷`` for x < 1, 0 beyond (smooth to second order at the cutoff).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["RadialBasis", "polynomial_envelope", "FLUSH_BELOW", "MIN_EXPONENT", "envelope_coefficients"]

MIN_EXPONENT = -80.0
"""Exponents of the Gaussians are clamped at this value (see :meth:`RadialBasis.forward`)."""
FLUSH_BELOW = 1e-20
"""Basis values below this are set to 0 (see :meth:`RadialBasis.forward`)."""


def envelope_coefficients(p: int) -> tuple[float, float, float]:
    """a, b, c of u(x) = 1 + a x^p + b x^(p+1) + c x^(p+2)."""
    return -(p + 1) * (p + 2) / 2, p * (p + 2), -p * (p + 1) / 2


def polynomial_envelope(x: torch.Tensor, exponent: int = 5) -> torch.Tensor:
    """Envelope u(x) for scaled distances x (any shape); 0 for x ≥ 1, the polynomial below.

    Negative x (only the layer norm feeds arbitrary scalars) still use the polynomial, as upstream.
    """
    p = exponent
    a, b, c = envelope_coefficients(p)
    xp = x.pow(p)
    poly = 1 + xp * (a + x * (b + c * x))
    return torch.where(x < 1, poly, torch.zeros_like(poly))


class RadialBasis(nn.Module):
    """Enveloped Gaussian basis of ``n_rbf`` functions on [0, cutoff].

    Args:
        n_rbf: number of basis functions (≥ 2; the centre spacing defines the width).
        cutoff: distance (in the units of the input) where the envelope reaches 0.
        envelope_exponent: p of the polynomial envelope (5 in GET).

    Shapes: ``forward(d)`` takes d [...] and returns [..., n_rbf].
    The centres are the buffer ``offset`` [n_rbf] (official key ``rbf.rbf.offset``).
    """

    def __init__(self, n_rbf: int, cutoff: float, envelope_exponent: int = 5):
        super().__init__()
        if n_rbf < 2:
            raise ValueError(f"RadialBasis needs n_rbf >= 2 (got {n_rbf}): the spacing of the centres sets the width")
        offset = torch.linspace(0, 1, n_rbf, dtype=torch.float32)
        self.register_buffer("offset", offset)
        # The width comes from the float32 spacing, turned into a Python double, as upstream.
        self.gamma = -0.5 / float(offset[1] - offset[0]) ** 2
        self.inv_cutoff = 1.0 / float(cutoff)
        self.cutoff = float(cutoff)
        self.envelope_exponent = envelope_exponent

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        x = d * self.inv_cutoff
        env = polynomial_envelope(x, self.envelope_exponent)
        # Exponents below −80 are clamped (exp of them would be subnormal, ~7x slower on CPU), and values
        # below FLUSH_BELOW (≈ e^−46; most of a basis row: centres far from d) become exact zeros: a product
        # of such a value with a gradient is subnormal, and a weight gradient of these features (Σ featureᵀ ·
        # gradient) ran up to 15x slower through them. Far below float32 resolution of every sum they enter.
        diff = x.unsqueeze(-1) - self.offset
        if not (torch.is_grad_enabled() and d.requires_grad):
            # Same arithmetic in place: one [..., n_rbf] buffer instead of five.
            out = diff.square_().mul_(self.gamma).clamp_(min=MIN_EXPONENT).exp_().mul_(env.unsqueeze(-1))
            return F.threshold_(out, FLUSH_BELOW, 0.0)
        exponent = (self.gamma * diff.square()).clamp_(min=MIN_EXPONENT)
        return F.threshold(env.unsqueeze(-1) * torch.exp(exponent), FLUSH_BELOW, 0.0)

    def with_derivative(self, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The basis [..., n_rbf] of ``d`` [...] (as :meth:`forward`) and its derivative with respect to d
        [..., n_rbf] (per unit of d), without autograd: for hand-written backward passes."""
        with torch.no_grad():
            x = d * self.inv_cutoff
            p = self.envelope_exponent
            a, b, c = envelope_coefficients(p)
            env = polynomial_envelope(x, p)
            env_slope = torch.where(x < 1, x.pow(p - 1) * (a * p + x * (b * (p + 1) + c * (p + 2) * x)), 0.0)
            diff = x.unsqueeze(-1) - self.offset
            exponent = diff.square().mul_(self.gamma)
            free = exponent >= MIN_EXPONENT  # where the clamp does not hold the exponent
            gauss = exponent.clamp_(min=MIN_EXPONENT).exp_()
            value = gauss * env.unsqueeze(-1)
            kept = value > FLUSH_BELOW
            slope = diff.mul_(2 * self.gamma).mul_(free).mul_(env.unsqueeze(-1)).add_(env_slope.unsqueeze(-1))
            slope = slope.mul_(gauss).mul_(kept).mul_(self.inv_cutoff)
            return value.mul_(kept), slope

    def extra_repr(self) -> str:
        return f"n_rbf={self.offset.numel()}, cutoff={self.cutoff}"
