"""Is a rollout a molecule, and does it sample the molecule's ensemble? Judged against a reference MD run.

:class:`EnsembleComparison` takes the reference's frames (same atoms, same order) and, for a rollout's frames:

* the Jensen–Shannon divergence of the bond-length, angle and torsion distributions against the reference
  (:func:`~geomol.data.chemistry.conformations.ensemble_divergence`), beside the reference's first half against its second
  half (the floor: what sampling noise alone gives) and a frozen structure (the start frame, never moving: the
  ceiling a model must beat);
* bonds against the reference's mean bond lengths: the largest deviation per frame, and the frames with a bond more
  than :data:`~geomol.data.chemistry.trajectory.BROKEN_BOND` (0.3 Å) from its MD mean;
* a verdict: a model whose divergence of some kind is no lower than the frozen structure's is "no better than no
  motion" (:meth:`EnsembleComparison.verdict`).

:meth:`EnsembleComparison.results` is the ``"ensemble"`` record of a molecule rollout's JSON summary.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from geomol.data.chemistry.conformations import (KINDS, InternalCoordinates, bond_deviations, ensemble_divergence,
                                       frozen_structure, half_against_half)
from geomol.data.chemistry.trajectory import BROKEN_BOND
from geomol.errors import ConfigError

__all__ = ["EnsembleComparison", "ensemble_line"]


class EnsembleComparison:
    """A rollout's ensemble against a reference run's.

    Args:
        bonds: [B, 2] the atoms' bonds (angles and torsions follow). reference: [F, N, 3] frames (Å).
        source: the reference, for the record. start: [N, 3] the rollout's start frame (the frozen structure).
    """

    def __init__(self, bonds, reference, source: str = "", start=None):
        self.coordinates = InternalCoordinates.of_bonds(bonds)
        self.reference = np.asarray(reference, dtype=np.float64)
        if self.reference.ndim != 3 or len(self.reference) < 2:
            raise ConfigError(f"the reference needs [frames ≥ 2, atoms, 3] positions, got {self.reference.shape}")
        self.source = str(source)
        self.start = self.reference[0] if start is None else np.asarray(start, dtype=np.float64)
        self.mean_lengths = self.coordinates.values(self.reference)["bond"].mean(0)
        self._floor = half_against_half(self.coordinates, self.reference)
        self._frozen = frozen_structure(self.coordinates, self.start, self.reference)

    def compare(self, frames) -> dict[str, Any]:
        """Divergences, bond deviations and the verdict for rollout frames [F, N, 3] (time order)."""
        frames = np.asarray(frames, dtype=np.float64)
        divergence = ensemble_divergence(self.coordinates, frames, self.reference)
        deviation = bond_deviations(frames, self.coordinates.bonds, self.mean_lengths).max(axis=1)  # [F]
        reference_deviation = bond_deviations(self.reference, self.coordinates.bonds, self.mean_lengths).max()
        return {"js_divergence": divergence, "js_floor_half_against_half": self._floor,
                "js_frozen_structure": self._frozen, "verdict": self.verdict(divergence),
                "bond_deviation_from_md_mean_max_A": float(deviation.max()),
                "bond_deviation_per_frame_max_A": deviation.tolist(),
                "frames_with_a_bond_off_md_mean": float((deviation > BROKEN_BOND).mean()),
                "first_frame_with_a_bond_off_md_mean": (int(np.argmax(deviation > BROKEN_BOND))
                                                        if (deviation > BROKEN_BOND).any() else None),
                "reference_bond_deviation_max_A": float(reference_deviation), "threshold_A": BROKEN_BOND}

    def verdict(self, divergence: dict[str, float | None]) -> str:
        """"better than no motion" when every kind's divergence is below the frozen structure's, else which not."""
        worse = [k for k in KINDS if divergence[k] is not None and self._frozen[k] is not None
                 and divergence[k] >= self._frozen[k]]
        return "better than no motion" if not worse else f"no better than no motion ({', '.join(worse)})"

    def results(self, frames) -> dict[str, Any]:
        """JSON-ready record of :meth:`compare` with what was compared."""
        return {"reference": self.source, "reference_frames": len(self.reference),
                "coordinates": self.coordinates.counts(), **self.compare(frames)}


def ensemble_line(record: dict[str, Any]) -> str:
    """One line for a terminal: JS per kind with the floor and the frozen structure, bonds off the MD mean."""
    def kinds(values):
        return " / ".join("–" if values[k] is None else f"{values[k]:.3f}" for k in KINDS)

    return (f"ensemble vs {record['reference']} (JS bond / angle / torsion): rollout {kinds(record['js_divergence'])}; "
            f"MD half vs half {kinds(record['js_floor_half_against_half'])}; frozen start "
            f"{kinds(record['js_frozen_structure'])}: {record['verdict']}. Largest bond deviation from the MD mean "
            f"{record['bond_deviation_from_md_mean_max_A']:.2f} Å (MD itself {record['reference_bond_deviation_max_A']:.2f}"
            f" Å); frames with a bond > {record['threshold_A']:g} Å off: "
            f"{100 * record['frames_with_a_bond_off_md_mean']:.1f}%")
