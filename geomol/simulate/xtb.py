"""GFN2-xTB energies and forces from ``tblite`` (optional extra ``md``), in kcal/mol and Å.

Every call converges the electronic structure from a fresh guess, so the force is a function of the
positions alone: a run resumed from a checkpoint computes exactly the forces the uninterrupted run
computed (reusing the previous step's wavefunction would be ~1.5x faster but ties each force to the
path that led to it).
"""
from __future__ import annotations

import importlib.metadata

import numpy as np

from geomol.errors import ConfigError, SimulationError

__all__ = ["HARTREE_KCAL", "BOHR_ANGSTROM", "XTBForceField", "tblite_version"]

HARTREE_KCAL = 627.5094740631
"""1 Hartree in kcal/mol."""
BOHR_ANGSTROM = 0.529177210903
"""1 Bohr in Å."""


def tblite_version() -> str:
    try:
        return importlib.metadata.version("tblite")
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _calculator_class():
    try:
        from tblite.interface import Calculator
    except ImportError as exc:
        raise ConfigError("small-molecule MD needs tblite (GFN2-xTB): pip install -e '.[md]'") from exc
    return Calculator


class XTBForceField:
    """Callable positions [n, 3] Å → (energy kcal/mol, forces [n, 3] kcal/mol/Å).

    Args:
        numbers: [n] atomic numbers.
        method: tblite method name ("GFN2-xTB", "GFN1-xTB").
        charge: total charge (e).

    tblite's defaults are kept otherwise (accuracy 1, electronic temperature 300 K).
    """

    def __init__(self, numbers: np.ndarray, method: str = "GFN2-xTB", charge: float = 0.0):
        self.numbers = np.asarray(numbers, dtype=np.int64)
        self.method, self.charge = method, charge
        self._calculator_class = _calculator_class()
        self._calculator = None
        self.calls = 0

    def __call__(self, positions: np.ndarray) -> tuple[float, np.ndarray]:
        bohr = np.asarray(positions, dtype=np.float64) / BOHR_ANGSTROM
        if self._calculator is None:
            self._calculator = self._calculator_class(self.method, self.numbers, bohr, charge=self.charge)
            self._calculator.set("verbosity", 0)
        else:
            self._calculator.update(bohr)
        try:
            result = self._calculator.singlepoint()
        except RuntimeError as exc:  # tblite raises RuntimeError when the SCF fails
            raise SimulationError(f"{self.method} failed at this geometry ({exc})") from exc
        self.calls += 1
        energy = float(result.get("energy")) * HARTREE_KCAL
        forces = -np.asarray(result.get("gradient")) * (HARTREE_KCAL / BOHR_ANGSTROM)
        return energy, forces
