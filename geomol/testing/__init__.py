"""Helpers for equivariance tests, shared by every layer and model test.

A test draws random elements of E(3) — a rotation from :func:`e3nn.o3.rand_matrix` (uniform on
SO(3)), composed with the inversion −I for the reflecting half of O(3), and a translation — applies
each to the inputs and checks that every output transforms as its kind says:

* ``POSITION``: x ↦ x Qᵀ + t (coordinates, in Å);
* ``VECTOR``: v ↦ v Qᵀ, no translation (velocities, displacements, forces);
* ``INVARIANT``: unchanged (energies, pK, node embeddings, logits).

Everything is checked in float64 so that tolerances can be tight (1e-8). This module is plain
PyTorch + e3nn: no Lightning, no other geomol layer.
"""
from __future__ import annotations

from typing import Callable, Literal, Mapping, NamedTuple

import torch
from e3nn import o3

__all__ = ["POSITION", "VECTOR", "INVARIANT", "Kind", "E3", "random_orthogonal", "random_e3", "apply_e3",
           "assert_equivariant"]

Kind = Literal["position", "vector", "invariant"]
POSITION: Kind = "position"
VECTOR: Kind = "vector"
INVARIANT: Kind = "invariant"


class E3(NamedTuple):
    """An element of E(3): orthogonal ``rotation`` Q [3, 3] and ``translation`` t [3] (Å).

    Unpacks as ``q, t = random_e3(...)``.
    """

    rotation: torch.Tensor
    translation: torch.Tensor

    @property
    def reflects(self) -> bool:
        return bool(torch.det(self.rotation) < 0)

    def act(self, x: torch.Tensor, kind: Kind) -> torch.Tensor:
        """x [..., 3] transformed as a ``kind`` (invariants returned as they are)."""
        if kind == INVARIANT:
            return x
        if kind not in (POSITION, VECTOR):
            raise ValueError(f"unknown kind {kind!r} (position | vector | invariant)")
        return apply_e3(x, self.rotation, self.translation if kind == POSITION else None)


def random_orthogonal(reflect: bool, dtype=torch.float64, generator: torch.Generator | None = None) -> torch.Tensor:
    """[3, 3] random orthogonal matrix, Haar-distributed on the component of O(3) with det −1 if ``reflect``.

    The rotation is e3nn's ``o3.rand_matrix``; it draws from torch's global generator, so it runs under a
    forked RNG seeded from ``generator`` (or the global one): seeded tests stay reproducible and the caller's
    random stream is untouched.
    """
    seed = int(torch.randint(0, 2 ** 62, (1,), generator=generator))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        q = o3.rand_matrix(dtype=dtype)
    return -q if reflect else q  # det(−Q) = −det(Q) in 3D: the inversion composed with a rotation


def random_e3(reflect: bool, dtype=torch.float64, generator: torch.Generator | None = None,
              scale: float = 10.0) -> E3:
    """A random :class:`E3` element whose translation has size ~``scale`` Å."""
    q = random_orthogonal(reflect, dtype, generator)
    return E3(q, scale * torch.randn(3, dtype=dtype, generator=generator))


def apply_e3(x: torch.Tensor, q: torch.Tensor, t: torch.Tensor | None = None) -> torch.Tensor:
    """x' = x Qᵀ + t for x [..., 3] (row vectors); ``t=None`` for vectors such as velocities."""
    out = x @ q.T
    return out if t is None else out + t


def assert_equivariant(
    fn: Callable[..., Mapping[str, torch.Tensor]],
    inputs: Mapping[str, tuple[torch.Tensor, Kind]],
    outputs: Mapping[str, Kind],
    *,
    atol: float = 1e-8,
    trials: int = 4,
    seed: int = 0,
) -> None:
    """Check ``fn`` under rotations, reflections and translations (alternating, ``trials`` draws).

    Args:
        fn: called as ``fn(**tensors)`` with one tensor per entry of ``inputs``; returns a mapping
            holding (at least) every name in ``outputs``.
        inputs: name → (tensor [..., 3] or any shape if invariant, its kind). Positions and vectors
            must be float64.
        outputs: name → kind of each output to check.
        atol: largest allowed absolute error, relative to max(1, largest reference entry).

    Raises AssertionError naming the output, the error and whether the draw reflected.
    """
    for name, (value, kind) in inputs.items():
        if kind != INVARIANT and value.dtype != torch.float64:
            raise TypeError(f"equivariance input {name!r} must be float64 for tight tolerances, got {value.dtype}")
    gen = torch.Generator().manual_seed(seed)
    reference = fn(**{name: value for name, (value, _) in inputs.items()})
    for trial in range(trials):
        g = random_e3(reflect=bool(trial % 2), generator=gen)
        moved = fn(**{name: g.act(value, kind) for name, (value, kind) in inputs.items()})
        for name, kind in outputs.items():
            expected = g.act(reference[name], kind)
            assert moved[name].shape == expected.shape, f"{name}: shape {tuple(moved[name].shape)} changed"
            err = (moved[name] - expected).abs().max().item() if expected.numel() else 0.0
            scale = max(1.0, expected.abs().max().item() if expected.numel() else 0.0)
            assert err <= atol * scale, (f"{name} ({kind}): equivariance error {err:.3g} > {atol * scale:.3g} "
                                         f"(reflect={g.reflects})")
