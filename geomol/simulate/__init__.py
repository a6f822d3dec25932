"""Generators of molecular-dynamics data with real engines (optional extra ``md``).

* :func:`simulate_small_molecule`: GFN2-xTB (``tblite``) Langevin MD of a small molecule by the MD17
  protocol, written as an MD17 npz (``R``, ``z``, ``E``, ``F``);
* :func:`simulate_protein`: OpenMM implicit-solvent MD of a protein (PDBFixer prepares it), written as
  a DCD trajectory and a topology PDB.

Both checkpoint as they go, so an interrupted run continues where it stopped and a finished one is
extended by asking for more; both write a summary JSON (settings, engine version, speed). The files
are read back by :mod:`geomol.data` like any other trajectory. The engines are imported only when a
simulation runs.
"""
from __future__ import annotations

__all__ = ["SmallMoleculeSettings", "simulate_small_molecule", "ProteinSettings", "simulate_protein"]


def __getattr__(name: str):
    if name in ("SmallMoleculeSettings", "simulate_small_molecule"):
        from geomol.simulate import small_molecule

        return getattr(small_molecule, name)
    if name in ("ProteinSettings", "simulate_protein"):
        from geomol.simulate import protein

        return getattr(protein, name)
    raise AttributeError(name)
