"""Helpers for equivariance tests, shared by every layer and model test.

A test draws a random element of E(3) (orthogonal matrix, with or without a reflection, and
a translation), applies it to the inputs, and checks that coordinates come out transformed
and scalars unchanged. Everything is in float64 so that tolerances can be tight (1e-8).
"""
from __future__ import annotations

from typing import Callable

import torch

__all__ = ["random_orthogonal", "random_e3", "apply_e3", "assert_equivariant"]


def random_orthogonal(reflect: bool, dtype=torch.float64, generator: torch.Generator | None = None) -> torch.Tensor:
    """[3, 3] random orthogonal matrix with determinant −1 if ``reflect`` else +1 (Haar on O(3))."""
    q, r = torch.linalg.qr(torch.randn(3, 3, dtype=dtype, generator=generator))
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    if (torch.det(q) < 0) != reflect:
        q[:, 0] = -q[:, 0]
    return q


def random_e3(reflect: bool, dtype=torch.float64, generator: torch.Generator | None = None, scale: float = 10.0):
    """A random (Q [3, 3], t [3]) with translation of size ~``scale`` Å."""
    return random_orthogonal(reflect, dtype, generator), scale * torch.randn(3, dtype=dtype, generator=generator)


def apply_e3(x: torch.Tensor, q: torch.Tensor, t: torch.Tensor | None = None) -> torch.Tensor:
    """x' = x Qᵀ + t for x [..., 3] (row vectors); ``t=None`` for vectors such as velocities."""
    out = x @ q.T
    return out if t is None else out + t


def assert_equivariant(
    fn: Callable[[torch.Tensor], tuple[list[torch.Tensor], list[torch.Tensor]]],
    coords: torch.Tensor,
    *,
    atol: float = 1e-8,
    trials: int = 4,
    seed: int = 0,
) -> None:
    """Check ``fn`` for rotations and reflections plus translations.

    ``fn(coords)`` returns ``(equivariant_points, invariants)``: tensors [..., 3] that must
    transform as points (x Qᵀ + t) and tensors that must not change.
    """
    gen = torch.Generator().manual_seed(seed)
    ref_points, ref_inv = fn(coords)
    for trial in range(trials):
        q, t = random_e3(reflect=bool(trial % 2), dtype=coords.dtype, generator=gen)
        points, inv = fn(apply_e3(coords, q, t))
        for ref, out in zip(ref_points, points):
            err = (apply_e3(ref, q, t) - out).abs().max().item()
            assert err < atol, f"equivariance error {err:.3g} (reflect={bool(trial % 2)})"
        for ref, out in zip(ref_inv, inv):
            err = (ref - out).abs().max().item()
            assert err < atol, f"invariance error {err:.3g} (reflect={bool(trial % 2)})"
