"""Conformational ensembles of a molecule: bond lengths, angles and torsions, and how far two ensembles differ.

A molecular-dynamics surrogate is judged as MD is judged (Timewarp, ITO): by the distributions it samples. For
atoms with bonds [B, 2] (a covalent graph), the internal coordinates are

* bonds (i, j): the length ‖x_i − x_j‖ in Å;
* angles (i, j, k), two bonds sharing the vertex j: the angle at j in degrees, in [0, 180];
* torsions (i, j, k, l), bonds i–j, j–k, k–l with i ≠ l: the dihedral angle about j–k in degrees, in (−180, 180].

Two ensembles of the same atoms (frames [F, N, 3] each: a rollout and a reference MD run, or two halves of one
run) are compared coordinate by coordinate: each coordinate's values in both ensembles are binned on one grid of
fixed width (:data:`BIN_WIDTHS`: 0.02 Å, 2.5°, 10°; torsions on the circle), and the Jensen–Shannon divergence of
the two histograms is taken in base 2 (0: the same distribution, 1: no overlap at all). The divergence of a kind
is the mean over its coordinates. Fixed widths make the numbers comparable between molecules and sample sizes; with
finite samples the divergence of two draws of the same distribution is not 0 but a floor that shrinks with the
number of frames, which is why a reference's first half against its second half is reported beside a model
(:func:`half_against_half`), and a frozen structure (one frame repeated: every coordinate a single value) as the
ceiling a model must beat (:func:`frozen_structure`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from geomol.data.chemistry.covalent_graph import angle_triplets
from geomol.errors import ConfigError

__all__ = ["KINDS", "BIN_WIDTHS", "InternalCoordinates", "js_divergence", "histogram_divergence",
           "ensemble_divergence", "half_against_half", "frozen_structure", "bond_deviations"]

KINDS = ("bond", "angle", "torsion")
BIN_WIDTHS = {"bond": 0.02, "angle": 2.5, "torsion": 10.0}
"""Histogram bin widths: Å for bonds, degrees for angles and torsions."""


def _frames(positions) -> np.ndarray:
    x = np.asarray(positions, dtype=np.float64)
    x = x[None] if x.ndim == 2 else x
    if x.ndim != 3 or x.shape[-1] != 3:
        raise ConfigError(f"positions must be [F, N, 3] or [N, 3], got {tuple(x.shape)}")
    return x


def _neighbours(bonds: np.ndarray) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, j in bonds.tolist():
        out.setdefault(i, []).append(j)
        out.setdefault(j, []).append(i)
    return {k: sorted(v) for k, v in out.items()}


def _torsions_of(bonds: np.ndarray) -> np.ndarray:
    """[T, 4] (i, j, k, l) for every central bond j–k (j < k) and neighbours i of j, l of k (i ≠ k, l ≠ j, i ≠ l)."""
    neighbours = _neighbours(bonds)
    found = [(i, j, k, l) for j, k in bonds.tolist() for i in neighbours[j] if i != k
             for l in neighbours[k] if l not in (j, i)]
    return np.array(found, dtype=np.int64).reshape(-1, 4)


def _dihedrals(x: np.ndarray, quads: np.ndarray) -> np.ndarray:
    """[F, T] dihedral angles (degrees, (−180, 180]) of ``quads`` [T, 4] in frames x [F, N, 3]."""
    b0 = x[:, quads[:, 0]] - x[:, quads[:, 1]]
    b1 = x[:, quads[:, 2]] - x[:, quads[:, 1]]
    b2 = x[:, quads[:, 3]] - x[:, quads[:, 2]]
    b1n = b1 / np.linalg.norm(b1, axis=-1, keepdims=True).clip(1e-12)
    v = b0 - (b0 * b1n).sum(-1, keepdims=True) * b1n
    w = b2 - (b2 * b1n).sum(-1, keepdims=True) * b1n
    return np.degrees(np.arctan2((np.cross(b1n, v) * w).sum(-1), (v * w).sum(-1)))


@dataclass(frozen=True)
class InternalCoordinates:
    """The bonds [B, 2], angles [A, 3] and torsions [T, 4] (atom indices) that follow from a covalent graph."""

    bonds: np.ndarray
    angles: np.ndarray
    torsions: np.ndarray

    @classmethod
    def of_bonds(cls, bonds) -> "InternalCoordinates":
        """From bonded pairs [B, 2] (any order; duplicates removed)."""
        bonds = np.unique(np.sort(np.asarray(bonds, dtype=np.int64).reshape(-1, 2), axis=1), axis=0)
        if len(bonds) and (bonds[:, 0] == bonds[:, 1]).any():
            raise ConfigError("a bond must join two different atoms")
        return cls(bonds, angle_triplets(bonds), _torsions_of(bonds))

    def counts(self) -> dict[str, int]:
        return {"bond": len(self.bonds), "angle": len(self.angles), "torsion": len(self.torsions)}

    def values(self, positions) -> dict[str, np.ndarray]:
        """{kind: [F, count]}: bond lengths (Å), angles and torsions (degrees) in frames ``positions`` [F, N, 3]."""
        x = _frames(positions)
        b = self.bonds
        out = {"bond": np.linalg.norm(x[:, b[:, 0]] - x[:, b[:, 1]], axis=-1) if len(b) else np.zeros((len(x), 0))}
        a = self.angles
        if len(a):
            u, w = x[:, a[:, 0]] - x[:, a[:, 1]], x[:, a[:, 2]] - x[:, a[:, 1]]
            cos = (u * w).sum(-1) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(w, axis=-1)).clip(1e-12)
            out["angle"] = np.degrees(np.arccos(cos.clip(-1.0, 1.0)))
        else:
            out["angle"] = np.zeros((len(x), 0))
        out["torsion"] = _dihedrals(x, self.torsions) if len(self.torsions) else np.zeros((len(x), 0))
        return out


def js_divergence(p, q) -> float:
    """Jensen–Shannon divergence (base 2, in [0, 1]) of two histograms (counts or probabilities, same bins)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.sum() <= 0 or q.sum() <= 0:
        raise ConfigError(f"need two non-empty histograms over the same bins, got shapes {p.shape} and {q.shape}")
    p, q = p / p.sum(), q / q.sum()
    m = 0.5 * (p + q)

    def kl(a):
        nonzero = a > 0
        return float((a[nonzero] * np.log2(a[nonzero] / m[nonzero])).sum())

    return float(np.clip(0.5 * kl(p) + 0.5 * kl(q), 0.0, 1.0))


def histogram_divergence(a, b, width: float, periodic: bool = False) -> float:
    """JS divergence of the samples ``a`` and ``b`` of one coordinate, binned ``width`` wide on one shared grid.

    ``periodic``: angles in degrees on the circle (bins of [−180, 180)); else the grid spans both samples.
    """
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if not len(a) or not len(b):
        raise ConfigError("both samples need at least one value")
    if periodic:
        bins = int(round(360.0 / width))
        index = lambda v: (np.floor((np.mod(v + 180.0, 360.0)) / width).astype(np.int64)) % bins  # noqa: E731
    else:
        low = min(a.min(), b.min())
        bins = int(np.floor((max(a.max(), b.max()) - low) / width)) + 1
        index = lambda v: np.floor((v - low) / width).astype(np.int64)  # noqa: E731
    return js_divergence(np.bincount(index(a), minlength=bins), np.bincount(index(b), minlength=bins))


def ensemble_divergence(coordinates: InternalCoordinates, frames, reference) -> dict[str, float | None]:
    """{kind: mean JS divergence over the coordinates of that kind} of ``frames`` against ``reference``.

    Args:
        coordinates: which bonds, angles and torsions. frames, reference: [F, N, 3] and [F', N, 3] (Å), the
            same atoms in the same order. A kind without coordinates (a diatomic has no angle) gives None.
    """
    ours, theirs = coordinates.values(frames), coordinates.values(reference)
    out: dict[str, float | None] = {}
    for kind in KINDS:
        count = ours[kind].shape[1]
        out[kind] = None if not count else float(np.mean([
            histogram_divergence(ours[kind][:, c], theirs[kind][:, c], BIN_WIDTHS[kind], periodic=kind == "torsion")
            for c in range(count)]))
    return out


def half_against_half(coordinates: InternalCoordinates, reference) -> dict[str, float | None]:
    """The floor: the reference's first half of frames against its second half (finite sampling, slow motions)."""
    x = _frames(reference)
    if len(x) < 2:
        raise ConfigError("the reference needs at least two frames to be split in halves")
    return ensemble_divergence(coordinates, x[: len(x) // 2], x[len(x) // 2:])


def frozen_structure(coordinates: InternalCoordinates, structure, reference) -> dict[str, float | None]:
    """The ceiling: a structure [N, 3] that never moves (every coordinate one value) against the reference."""
    return ensemble_divergence(coordinates, _frames(structure), reference)


def bond_deviations(positions, bonds, mean_lengths: Mapping | np.ndarray) -> np.ndarray:
    """[F, B] |d_b(t) − d̄_b| (Å): each bond's length in frames [F, N, 3] against its mean ``mean_lengths`` [B]
    (e.g. over a reference MD run), the measure of "a bond more than 0.3 Å from its MD mean"."""
    x, b = _frames(positions), np.asarray(bonds, dtype=np.int64).reshape(-1, 2)
    return np.abs(np.linalg.norm(x[:, b[:, 0]] - x[:, b[:, 1]], axis=-1) - np.asarray(mean_lengths, dtype=np.float64))
