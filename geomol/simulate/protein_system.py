"""A protein ready for OpenMM: PDBFixer preparation, implicit-solvent force fields, topology files.

:func:`prepare_structure` reads a PDB (plain or gzip), keeps the protein (heterogens and waters
removed, nonstandard residues replaced by their standard parents), adds missing heavy atoms and the
hydrogens of the given pH. :func:`build_system` makes the OpenMM system of one of
:data:`FORCE_FIELDS` with the chosen cutoff, constraints and hydrogen mass. :func:`write_topologies`
writes the topology PDB and a PQR beside it (the same atoms with the force field's partial charges
and radii, which MDAnalysis reads as the topology's charges).
"""
from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

import numpy as np

from geomol.errors import ConfigError, StructureReadError

__all__ = ["FORCE_FIELDS", "prepare_structure", "build_system", "write_topologies", "openmm_modules"]

FORCE_FIELDS: dict[str, tuple[str, ...]] = {
    "amber99sbildn-obc": ("amber99sbildn.xml", "amber99_obc.xml"),  # OpenMM's optimised GBSAOBCForce
    "amber14-gbn2": ("amber14-all.xml", "implicit/gbn2.xml"),  # a CustomGBForce: slower on the CPU
}
"""name → OpenMM force-field files (protein + implicit solvent)."""


def openmm_modules():
    """(openmm, openmm.app, openmm.unit); ConfigError naming the extra when OpenMM is missing."""
    try:
        import openmm
        from openmm import app, unit
    except ImportError as exc:
        raise ConfigError("protein MD needs OpenMM and PDBFixer: pip install -e '.[md]'") from exc
    return openmm, app, unit


def _structure_text(path: Path) -> tuple[str, str]:
    """(text, ``'pdb'`` or ``'cif'``) of a protein structure file, plain or gzip.

    Raises:
        StructureReadError: unreadable, not text, or another kind of file (an SD file of a small molecule, ...).
    """
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            text = handle.read()
    except UnicodeDecodeError:
        raise StructureReadError("not a text file (a protein structure is a PDB or mmCIF file)", source=path) from None
    except OSError as exc:
        raise StructureReadError(f"cannot read it ({exc.strerror or exc})", source=path) from None
    if text.lstrip().startswith("data_") and "_atom_site." in text:
        return text, "cif"
    if re.search(r"^(ATOM  |HETATM)", text, re.M):
        return text, "pdb"
    if re.search(r"^M  END|^\$\$\$\$|V[23]000", text, re.M):
        raise StructureReadError("an SD/MOL file (a small molecule), not a protein structure: 'geomol simulate "
                                 "protein' takes a PDB or mmCIF file; a small molecule runs with 'geomol simulate "
                                 "molecule SMILES'", source=path)
    raise StructureReadError("no ATOM or HETATM record: not a PDB (or mmCIF) protein structure", source=path)


def prepare_structure(pdb: str | Path, ph: float = 7.0):
    """(topology, positions) of the protein in ``pdb`` (PDB or mmCIF, plain or gzip) with missing atoms and
    hydrogens added.

    Raises:
        StructureReadError: unreadable file, another kind of file, or no protein residue in it.
    """
    openmm_modules()
    from pdbfixer import PDBFixer

    pdb = Path(pdb)
    text, kind = _structure_text(pdb)
    try:
        fixer = PDBFixer(**{"pdbfile" if kind == "pdb" else "pdbxfile": io.StringIO(text)})
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise StructureReadError(f"PDBFixer cannot read it ({exc})", source=pdb) from exc
    fixer.findMissingResidues()
    fixer.missingResidues = {}  # no loops are modelled: a gap stays a chain break
    fixer.findNonstandardResidues()
    fixer.replaceNonstandardResidues()
    fixer.removeHeterogens(keepWater=False)
    if fixer.topology.getNumAtoms() == 0:
        raise StructureReadError("no protein atoms left after removing heterogens and waters", source=pdb)
    fixer.findMissingAtoms()
    fixer.addMissingAtoms()
    fixer.addMissingHydrogens(ph)
    return fixer.topology, fixer.positions


def build_system(topology, force_field: str, cutoff_nm: float | None, constraints: str | None,
                 hydrogen_mass: float | None):
    """OpenMM System of ``topology`` with a force field of :data:`FORCE_FIELDS`.

    Args:
        cutoff_nm: None: no cutoff; else a non-periodic cutoff (nm) for the nonbonded and GB terms.
        constraints: None, "HBonds", "AllBonds" or "HAngles".
        hydrogen_mass: amu given to hydrogens (mass moved from their heavy atom); None: natural masses.
    """
    _, app, unit = openmm_modules()
    if force_field not in FORCE_FIELDS:
        raise ConfigError(f"unknown force field {force_field!r} (choose from {', '.join(FORCE_FIELDS)})")
    if constraints not in (None, "HBonds", "AllBonds", "HAngles"):
        raise ConfigError(f"constraints must be None, HBonds, AllBonds or HAngles, not {constraints!r}")
    forcefield = app.ForceField(*FORCE_FIELDS[force_field])
    options = {"constraints": getattr(app, constraints) if constraints else None}
    if cutoff_nm is None:
        options["nonbondedMethod"] = app.NoCutoff
    else:
        options.update(nonbondedMethod=app.CutoffNonPeriodic, nonbondedCutoff=cutoff_nm * unit.nanometer)
    if hydrogen_mass is not None:
        options["hydrogenMass"] = hydrogen_mass * unit.amu
    try:
        return forcefield.createSystem(topology, **options)
    except ValueError as exc:  # e.g. a residue the force field has no template for
        raise ConfigError(f"{force_field} cannot parametrise the structure: {exc}") from exc


def _charges_and_radii(system) -> tuple[np.ndarray, np.ndarray]:
    """[n] partial charges (e) and [n] radii (Å, half the Lennard-Jones r_min) of the system's atoms."""
    import openmm

    nonbonded = next(f for f in system.getForces() if isinstance(f, openmm.NonbondedForce))
    charges, radii = [], []
    for i in range(system.getNumParticles()):
        charge, sigma, _ = nonbonded.getParticleParameters(i)
        charges.append(charge._value)
        radii.append(sigma._value * 10 * 2 ** (1 / 6) / 2)
    return np.array(charges), np.array(radii)


def write_topologies(topology, positions, system, pdb_out: Path, pqr_out: Path) -> None:
    """Write the topology PDB and the PQR with the system's charges and radii (both atomically)."""
    import os

    import MDAnalysis as mda

    _, app, _ = openmm_modules()
    tmp = pdb_out.with_name(f".{pdb_out.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as handle:
        app.PDBFile.writeFile(topology, positions, handle, keepIds=True)
    os.replace(tmp, pdb_out)
    universe = mda.Universe(str(pdb_out))
    charges, radii = _charges_and_radii(system)
    universe.add_TopologyAttr("charges", charges)
    universe.add_TopologyAttr("radii", radii)
    tmp = pqr_out.with_name(f".{pqr_out.stem}.{os.getpid()}.tmp.pqr")
    universe.atoms.write(str(tmp))
    os.replace(tmp, pqr_out)
