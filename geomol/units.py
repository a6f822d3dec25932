"""Affinity units: pK, binding free energy ΔG (kcal/mol, kJ/mol) and concentrations (mol/L), one place.

pK = −log10(K / M) for a dissociation or inhibition constant K; a binding free energy gives
pK = −ΔG / (R T ln 10) at T = 298.15 K with R in kcal/(mol K) (1 kcal = 4.184 kJ), i.e. about
1.364 kcal/mol per pK unit.
"""
from __future__ import annotations

import math
import re

from geomol.errors import DatasetError

__all__ = ["GAS_CONSTANT_KCAL", "ROOM_TEMPERATURE", "KJ_PER_KCAL", "KCAL_PER_PK", "concentration_molar",
           "pk_from_concentration", "dg_kcal", "pk_from_dg", "dg_from_pk"]

GAS_CONSTANT_KCAL = 1.98720425864083e-3
"""R in kcal/(mol K)."""
ROOM_TEMPERATURE = 298.15
"""T in K used for every ΔG ↔ pK conversion."""
KJ_PER_KCAL = 4.184
KCAL_PER_PK = GAS_CONSTANT_KCAL * ROOM_TEMPERATURE * math.log(10.0)
"""R T ln 10 at 298.15 K: 1.36425 kcal/mol of binding free energy per pK unit."""

_MOLAR = {"fm": 1e-15, "pm": 1e-12, "nm": 1e-9, "um": 1e-6, "µm": 1e-6, "μm": 1e-6, "mm": 1e-3, "m": 1.0}
_KCAL_UNITS = {"kcal/mol", "kcal/mole", "kilocalorie/mole", "kilocalories/mole", "kilocalories/mol",
               "kilocalorie/mol"}
_KJ_UNITS = {"kj/mol", "kj/mole", "kilojoule/mole", "kilojoules/mole", "kilojoules/mol", "kilojoule/mol"}


def concentration_molar(value: float, unit: str, *, source: str | None = None) -> float:
    """A concentration in mol/L from a value and a unit among fM, pM, nM, uM (µM), mM, M."""
    factor = _MOLAR.get(unit.strip().lower())
    if factor is None:
        raise DatasetError(f"unknown concentration unit {unit!r} (expected fM, pM, nM, uM, mM or M)", source)
    molar = float(value) * factor
    if not molar > 0 or not math.isfinite(molar):
        raise DatasetError(f"affinity {value} {unit} is not a positive finite concentration", source)
    return molar


def pk_from_concentration(value: float, unit: str, *, source: str | None = None) -> float:
    """pK = -log10(K / M); e.g. ``pk_from_concentration(0.4, 'mM') == 3.398``."""
    return -math.log10(concentration_molar(value, unit, source=source))


def dg_kcal(value: float, unit: str, *, source: str | None = None) -> float:
    """A free energy in kcal/mol from kcal/mol or kJ/mol (any spelling: ``'kilojoules / mole'``)."""
    key = re.sub(r"\s+", "", unit.lower())
    if key in _KCAL_UNITS:
        return float(value)
    if key in _KJ_UNITS:
        return float(value) / KJ_PER_KCAL
    raise DatasetError(f"unknown free-energy unit {unit!r} (expected kcal/mol or kJ/mol)", source)


def pk_from_dg(dg: float, unit: str = "kcal/mol", *, temperature: float = ROOM_TEMPERATURE,
               source: str | None = None) -> float:
    """pK = -ΔG / (R T ln 10); ``dg`` is a binding free energy (negative for binders)."""
    return -dg_kcal(dg, unit, source=source) / (GAS_CONSTANT_KCAL * temperature * math.log(10.0))


def dg_from_pk(pk: float, *, temperature: float = ROOM_TEMPERATURE) -> float:
    """ΔG in kcal/mol from pK (inverse of :func:`pk_from_dg`)."""
    return -float(pk) * GAS_CONSTANT_KCAL * temperature * math.log(10.0)
