"""The chemistry of a rollout's frames as they are predicted: bond-length and angle errors, broken bonds, clashes.

:class:`ChemistryTracker` collects predicted frames (or reference frames) a few at a time and measures
them with :func:`~geomol.data.chemistry.trajectory.trajectory_chemistry` against the rollout's start
frame, so that a long rollout keeps only per-frame numbers. :meth:`ChemistryTracker.results` is the
``"chemistry"`` record of a rollout's JSON summary:

.. code-block:: text

    "chemistry": {"bonds": "854 bonds and 1066 angles from the topology", "bond_source": "topology",
                  "num_bonds": 854, "num_angles": 1066, "reference_frame": 0,
                  "broken_bond_threshold_A": 0.3, "clash_distance_A": 2.0,
                  "frames": [3, 7, ...],                       # trajectory frame numbers measured
                  "per_frame": {"bond_error_median_A": [...], "bond_error_max_A": [...],
                                "angle_error_median_deg": [...], "angle_error_max_deg": [...],
                                "broken_bonds": [...], "clashes": [...]},
                  "bond_error_median_A": 0.03, "bond_error_max_A": 1.2, ...,  # ChemistryFrames.summary()
                  "first_broken_frame": 22}
"""
from __future__ import annotations

from typing import Any

import numpy as np

from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.data.chemistry.trajectory import BROKEN_BOND, CLASH_DISTANCE, ChemistryFrames, trajectory_chemistry

__all__ = ["ChemistryTracker", "chemistry_line"]


class ChemistryTracker:
    """Running chemistry of frames against a reference frame.

    Args:
        graph: the selection's bonds (:meth:`CovalentGraph.of_selection`).
        reference: [N, 3] frame whose bond lengths and angles are the targets (the rollout's start, Å).
        reference_frame: its trajectory frame number (recorded). chunk: frames measured together.
    """

    def __init__(self, graph: CovalentGraph, reference: np.ndarray, reference_frame: int = 0, chunk: int = 32):
        self.graph, self.reference = graph, np.asarray(reference, dtype=np.float64)
        self.reference_frame, self.chunk = int(reference_frame), chunk
        self.frames: list[int] = []
        self._pending: list[np.ndarray] = []
        self._parts: list[ChemistryFrames] = []

    def add(self, frame: int, positions: np.ndarray) -> None:
        """Record frame number ``frame`` with positions [N, 3] (Å)."""
        self.frames.append(int(frame))
        self._pending.append(np.asarray(positions, dtype=np.float64))
        if len(self._pending) >= self.chunk:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._parts.append(trajectory_chemistry(np.stack(self._pending), self.graph, self.reference))
            self._pending = []

    def measured(self) -> ChemistryFrames:
        """Every frame added so far."""
        self._flush()
        return ChemistryFrames.concatenate(self._parts)

    def results(self) -> dict[str, Any]:
        """JSON-ready record (module docstring)."""
        measured = self.measured()
        summary = measured.summary()
        first = summary.pop("first_broken_index")
        return {"bonds": self.graph.describe(), "bond_source": self.graph.source,
                "num_bonds": len(self.graph.bonds), "num_angles": len(self.graph.angles),
                "reference_frame": self.reference_frame, "broken_bond_threshold_A": BROKEN_BOND,
                "clash_distance_A": CLASH_DISTANCE, "frames": list(self.frames), "per_frame": measured.per_frame(),
                **summary, "first_broken_frame": None if first is None else self.frames[first]}


def _value(value, unit: str, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def chemistry_line(record: dict[str, Any]) -> str:
    """One line for people: typical and worst bond error, angle error, frames with broken bonds and clashes."""
    if not record["frames"]:
        return "chemistry: no predicted frame"
    if not record["num_bonds"]:
        bonds = "no bonds in the selection (neither in the topology nor perceived): bond metrics n/a"
    else:
        broken = record["first_broken_frame"]
        bonds = (f"bond-length error median {_value(record['bond_error_median_A'], ' Å', 3)}, max "
                 f"{_value(record['bond_error_max_A'], ' Å')}; angle error median "
                 f"{_value(record['angle_error_median_deg'], '°', 1)}, "
                 f"max {_value(record['angle_error_max_deg'], '°', 0)}"
                 f"; frames with a broken bond (> {record['broken_bond_threshold_A']:g} Å): "
                 f"{100 * record['broken_bond_fraction']:.0f}%" + (f" (first: frame {broken})" if broken is not None
                                                                    else ""))
    return (f"chemistry vs frame {record['reference_frame']} ({record['bonds']}): {bonds}; frames with a clash "
            f"(< {record['clash_distance_A']:g} Å): {100 * record['clash_fraction']:.0f}%")
