"""Does a trajectory keep its chemistry? Bond lengths, angles, broken bonds and clashes, frame by frame.

For frames x(t) [F, N, 3] of a selection with a :class:`~geomol.data.chemistry.covalent_graph.CovalentGraph`
and a reference frame x_ref [N, 3] (a rollout's start frame: the last state the model saw):

* bond-length error of bond b = (i, j): |d_b(t) − d_b(ref)|, d = ‖x_i − x_j‖ in Å; per frame its
  median and maximum over the bonds;
* angle error of angle (i, j, k): |θ(t) − θ(ref)| in degrees, θ the angle at j; median and maximum;
* broken bonds: bonds whose length is off by more than :data:`BROKEN_BOND` (0.3 Å);
* clashes: pairs of heavy atoms (not hydrogen) closer than :data:`CLASH_DISTANCE` (2 Å) that are not
  1-2 (bonded) or 1-3 (ends of an angle) pairs; found with geomol's neighbour search
  (:func:`~geomol.nn.neighbors.radius_search`, all frames of a chunk at once).

:func:`bond_errors_by_kind` splits the bond-length errors by kind of bond (the two atom names:
"CA–N", "C–O", ...): where a model keeps bonds and where not.

The same numbers for a reference MD trajectory say how far real dynamics moves bonds (thermal
fluctuations of a few hundredths of an Å); a model should stay near them. Everything is computed in
float64 torch on the CPU, vectorised over frames; a 3,000-atom protein over hundreds of frames takes
well under a second per hundred frames.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Iterable, Sequence

import numpy as np
import torch

from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.errors import ConfigError
from geomol.nn.neighbors import radius_search

__all__ = ["BROKEN_BOND", "CLASH_DISTANCE", "ChemistryFrames", "bond_lengths", "bond_errors", "bond_kinds",
           "bond_errors_by_kind", "bond_angles", "count_clashes", "trajectory_chemistry"]

BROKEN_BOND = 0.3  # Å: a bond this much longer or shorter than in the reference frame is broken
CLASH_DISTANCE = 2.0  # Å: non-bonded heavy atoms closer than this clash


def _frames(positions) -> torch.Tensor:
    """[F, N, 3] float64 tensor (a single [N, 3] frame becomes F = 1); non-finite coordinates raise."""
    x = positions if torch.is_tensor(positions) else torch.from_numpy(np.array(positions, dtype=np.float64))
    x = x.detach().to("cpu", torch.float64)
    x = x.unsqueeze(0) if x.ndim == 2 else x
    if x.ndim != 3 or x.shape[-1] != 3:
        raise ConfigError(f"positions must be [F, N, 3] or [N, 3], got {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ConfigError("positions contain NaN or infinite coordinates: no chemistry to measure")
    return x


def bond_lengths(positions, bonds) -> torch.Tensor:
    """[F, B] lengths (Å) of ``bonds`` [B, 2] in frames ``positions`` [F, N, 3] (or [N, 3] → [1, B])."""
    x, b = _frames(positions), torch.as_tensor(np.asarray(bonds, dtype=np.int64)).view(-1, 2)
    return (x[:, b[:, 0]] - x[:, b[:, 1]]).norm(dim=-1)


def bond_errors(positions, bonds, reference) -> torch.Tensor:
    """[F, B] |d_b(t) − d_b(ref)| (Å) of ``bonds`` [B, 2] in ``positions`` [F, N, 3] against ``reference`` [N, 3]."""
    return (bond_lengths(positions, bonds) - bond_lengths(reference, bonds)).abs()


def bond_kinds(bonds, names: Sequence[str]) -> list[str]:
    """[B] kind of each bond from its atoms' names, the two in alphabetical order ("C–N", "CA–N", "C–O", ...)."""
    return ["–".join(sorted((str(names[i]), str(names[j])))) for i, j in np.asarray(bonds).tolist()]


def bond_errors_by_kind(errors, kinds: Sequence[str]) -> dict[str, dict[str, float]]:
    """Where are bonds kept and where not: per kind of bond, from errors [F, B] (Å) of the bonds of ``kinds`` [B].

    Returns:
        {kind: {"bonds": count, "median_A": median over frames and bonds, "max_A": largest,
        "broken_frame_fraction": frames in which a bond of this kind is off by more than BROKEN_BOND}}.
    """
    errors, kinds = np.asarray(errors, dtype=np.float64), np.asarray(kinds)
    out = {}
    for kind in sorted(set(kinds.tolist())):
        chosen = errors[:, kinds == kind]
        out[kind] = {"bonds": int(chosen.shape[1]), "median_A": float(np.median(chosen)),
                     "max_A": float(chosen.max()), "broken_frame_fraction": float((chosen > BROKEN_BOND).any(1).mean())}
    return out


def bond_angles(positions, angles) -> torch.Tensor:
    """[F, A] angles (degrees) at the vertex j of each (i, j, k) of ``angles`` [A, 3] in ``positions`` [F, N, 3]."""
    x, a = _frames(positions), torch.as_tensor(np.asarray(angles, dtype=np.int64)).view(-1, 3)
    u, w = x[:, a[:, 0]] - x[:, a[:, 1]], x[:, a[:, 2]] - x[:, a[:, 1]]
    return torch.rad2deg(torch.atan2(torch.linalg.cross(u, w).norm(dim=-1), (u * w).sum(-1)))


def count_clashes(positions, graph: CovalentGraph, distance: float = CLASH_DISTANCE,
                  frames_per_chunk: int = 16) -> np.ndarray:
    """[F] int64: pairs of heavy atoms closer than ``distance`` (Å) that are not 1-2 or 1-3 pairs, per frame."""
    x = _frames(positions)
    n = graph.num_atoms
    if x.shape[1] != n:
        raise ConfigError(f"the positions have {x.shape[1]} atoms, the covalent graph {n}")
    heavy = torch.as_tensor(np.flatnonzero(graph.heavy))
    excluded = torch.as_tensor(graph.excluded)
    counts = []
    for begin in range(0, x.shape[0], frames_per_chunk):
        chunk = x[begin:begin + frames_per_chunk, heavy]  # [f, H, 3]
        f, h = chunk.shape[:2]
        frame_of = torch.arange(f).repeat_interleave(h)
        i, j = radius_search(chunk.reshape(-1, 3), chunk.reshape(-1, 3), distance, frame_of, frame_of)
        keep = i < j  # each pair once; both in the same frame, so heavy[i % h] < heavy[j % h]
        i, j = i[keep], j[keep]
        clash = ~torch.isin(heavy[i % h] * n + heavy[j % h], excluded)
        counts.append(torch.bincount(i[clash] // h, minlength=f))
    return torch.cat(counts).numpy().astype(np.int64) if counts else np.zeros(0, dtype=np.int64)


@dataclass
class ChemistryFrames:
    """Per-frame chemistry of F frames (see the module docstring); NaN where there is no bond or angle.

    Attributes:
        bond_error_median, bond_error_max: [F] Å. angle_error_median, angle_error_max: [F] degrees.
        broken_bonds: [F] bonds off by more than :data:`BROKEN_BOND`. clashes: [F] clashing pairs.
    """

    bond_error_median: np.ndarray
    bond_error_max: np.ndarray
    angle_error_median: np.ndarray
    angle_error_max: np.ndarray
    broken_bonds: np.ndarray
    clashes: np.ndarray

    def __len__(self) -> int:
        return len(self.clashes)

    @classmethod
    def concatenate(cls, parts: Iterable["ChemistryFrames"]) -> "ChemistryFrames":
        """The frames of several parts (windows, chunks) one after the other."""
        parts = list(parts)
        return cls(*(np.concatenate([getattr(p, f.name) for p in parts]) if parts else np.zeros(0)
                     for f in fields(cls)))

    def summary(self) -> dict[str, Any]:
        """Over all frames: mean of the per-frame medians, the largest error, and the fraction of frames
        with a broken bond or a clash (None for a metric without bonds, angles or frames)."""
        def over_frames(values: np.ndarray, reduce) -> float | None:
            values = values[np.isfinite(values)]
            return float(reduce(values)) if len(values) else None

        broken = np.flatnonzero(self.broken_bonds > 0)
        empty = len(self) == 0
        return {"bond_error_median_A": over_frames(self.bond_error_median, np.mean),
                "bond_error_max_A": over_frames(self.bond_error_max, np.max),
                "angle_error_median_deg": over_frames(self.angle_error_median, np.mean),
                "angle_error_max_deg": over_frames(self.angle_error_max, np.max),
                "broken_bond_fraction": None if empty or np.isnan(self.bond_error_max).all()
                else float(np.mean(self.broken_bonds > 0)),
                "clash_fraction": None if empty else float(np.mean(self.clashes > 0)),
                "first_broken_index": int(broken[0]) if len(broken) else None}

    def per_frame(self) -> dict[str, list]:
        """JSON-ready per-frame lists (None for NaN)."""
        def listed(values: np.ndarray) -> list:
            return [None if isinstance(v, float) and math.isnan(v) else v for v in values.tolist()]

        return {"bond_error_median_A": listed(self.bond_error_median), "bond_error_max_A": listed(self.bond_error_max),
                "angle_error_median_deg": listed(self.angle_error_median),
                "angle_error_max_deg": listed(self.angle_error_max),
                "broken_bonds": self.broken_bonds.tolist(), "clashes": self.clashes.tolist()}


def _median_max(errors: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per row of [F, K] errors: median and maximum ([F] each; NaN when K = 0)."""
    if errors.shape[1] == 0:
        nan = np.full(errors.shape[0], np.nan)
        return nan, nan.copy()
    return np.median(errors.numpy(), axis=1), errors.max(dim=1).values.numpy()


def trajectory_chemistry(positions, graph: CovalentGraph, reference) -> ChemistryFrames:
    """Chemistry of frames ``positions`` [F, N, 3] (Å) against the reference frame ``reference`` [N, 3] (Å).

    Bond lengths and angles are compared with their values in ``reference``; clashes do not need it.
    Raises ConfigError for shapes that do not match the graph or non-finite coordinates.
    """
    x, ref = _frames(positions), _frames(reference)
    if ref.shape[0] != 1 or x.shape[1] != graph.num_atoms or ref.shape[1] != graph.num_atoms:
        raise ConfigError(f"need frames [F, {graph.num_atoms}, 3] and one reference frame [{graph.num_atoms}, 3], "
                          f"got {tuple(x.shape)} and {tuple(ref.shape)}")
    bond_error = bond_errors(x, graph.bonds, ref)  # [F, B]
    angle_error = (bond_angles(x, graph.angles) - bond_angles(ref, graph.angles)).abs()  # [F, A]
    bond_median, bond_max = _median_max(bond_error)
    angle_median, angle_max = _median_max(angle_error)
    broken = (bond_error > BROKEN_BOND).sum(1).numpy().astype(np.int64)
    return ChemistryFrames(bond_median, bond_max, angle_median, angle_max, broken, count_clashes(x, graph))
