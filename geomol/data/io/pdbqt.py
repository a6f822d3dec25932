"""Docking poses from PDBQT files (AutoDock Vina, smina, gnina output; meeko input) as RDKit molecules.

A PDBQT file holds one ligand in one or more poses (``MODEL`` … ``ENDMDL``, best first), each a list
of atoms with AutoDock types (``A`` aromatic carbon, ``NA``/``OA`` acceptors, ``HD`` polar hydrogen,
...), coordinates (Å) and partial charges, but no bonds and no bond orders. The bond orders come from:

* a SMILES template (``template=``, e.g. ``--smiles`` on the command line): the pose's heavy atoms are
  bonded by distance and take the template's bond orders and charges (RDKit
  ``AssignBondOrdersFromTemplate``); hydrogens are then added at computed positions;
* else the ``REMARK SMILES`` lines that meeko writes into the PDBQTs it prepares (and Vina, smina and
  gnina copy into their output): meeko rebuilds the molecule from them exactly as it was prepared,
  hydrogens included. meeko is an optional extra (``pip install meeko``); without it such a file
  raises an error saying so.

A file with neither raises a :class:`~geomol.errors.StructureReadError` saying what to give. Each pose
becomes one molecule titled after the ligand (``REMARK Name =`` when the file has one, else the file
name without suffix; ``<name> pose <k>`` when the file holds several poses) carrying ``_geomol_source``,
``_geomol_record`` (the pose index, from 0) and, when the docking program wrote one, its score as the
property ``docking_score`` (kcal/mol: Vina's ``REMARK VINA RESULT``, gnina's ``minimizedAffinity``).
Flexible receptor residues in the output (``BEGIN_RES`` … ``END_RES``) are not part of the ligand.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np
from rdkit import Chem
from rdkit.Chem import AllChem, rdDetermineBonds

from geomol.data.io._source import rdkit_messages, rdkit_reason, read_text, third_party_errors
from geomol.errors import StructureReadError

__all__ = ["PDBQT_SUFFIX", "is_pdbqt", "read_pdbqt_poses", "MEEKO_HINT"]

PDBQT_SUFFIX = ".pdbqt"
MEEKO_HINT = "pip install meeko"
_AD_ELEMENTS = {"A": "C", "NA": "N", "NS": "N", "OA": "O", "OS": "O", "SA": "S", "HD": "H", "HS": "H",
                "CL": "Cl", "BR": "Br", "MG": "Mg", "MN": "Mn", "ZN": "Zn", "CA": "Ca", "FE": "Fe", "CU": "Cu"}
_MACROCYCLE_GLUE = re.compile(r"^G\d$")  # meeko's dummy atoms closing a macrocycle: not atoms of the ligand
_MACROCYCLE_CARBON = re.compile(r"^CG\d$")
_SCORE = (re.compile(r"^REMARK VINA RESULT:\s+(-?\d+\.?\d*)"), re.compile(r"^REMARK minimizedAffinity\s+(-?\d+\.?\d*)"))
_NAME = re.compile(r"^REMARK\s+Name\s*=\s*(\S.*)$")


def is_pdbqt(path: str | PathLike) -> bool:
    """True for a ``.pdbqt`` file name (also ``.pdbqt.gz`` / ``.pdbqt.bz2``)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2"):
        suffixes.pop()
    return bool(suffixes) and suffixes[-1] == PDBQT_SUFFIX


@dataclass
class _Pose:
    """One MODEL of a PDBQT file: its atom lines, its REMARK lines and the docking score (kcal/mol or None)."""

    atoms: list[str] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)
    score: float | None = None


def _poses(text: str) -> list[_Pose]:
    poses, current, in_residue = [], _Pose(), False
    for line in text.splitlines():
        record = line[:6].strip()
        if record == "MODEL":
            current = _Pose()
        elif record == "ENDMDL":
            poses.append(current)
            current = _Pose()
        elif record == "BEGIN_RES" or record == "END_RES":
            in_residue = record == "BEGIN_RES"
        elif record in ("ATOM", "HETATM") and not in_residue:
            current.atoms.append(line)
        elif record == "REMARK":
            current.remarks.append(line)
            found = next((m for m in (p.match(line) for p in _SCORE) if m), None)
            if found and current.score is None:
                current.score = float(found.group(1))
    if current.atoms:  # a file without MODEL records is one pose
        poses.append(current)
    return [p for p in poses if p.atoms]


def _element(ad_type: str) -> str | None:
    """The element of an AutoDock atom type; None for meeko's macrocycle dummy atoms."""
    if _MACROCYCLE_GLUE.match(ad_type):
        return None
    if _MACROCYCLE_CARBON.match(ad_type):
        return "C"
    symbol = _AD_ELEMENTS.get(ad_type.upper(), ad_type)
    return symbol[:1].upper() + symbol[1:].lower()


def _heavy_atom_molecule(pose: _Pose, path, record: str) -> Chem.Mol:
    """The pose's heavy atoms bonded by distance (single bonds), one conformer (Å)."""
    table = Chem.GetPeriodicTable()
    mol, coords = Chem.RWMol(), []
    for line in pose.atoms:
        element = _element(line[76:79].strip() or line[12:16].strip()[:1])
        if element is None or element == "H":
            continue
        try:
            atom = Chem.Atom(table.GetAtomicNumber(element))
            coords.append([float(line[30:38]), float(line[38:46]), float(line[46:54])])
        except (RuntimeError, ValueError):
            raise StructureReadError(f"cannot read the atom line {line.strip()!r} (AutoDock type "
                                     f"{line[76:79].strip()!r})", source=path, record=record) from None
        mol.AddAtom(atom)
    if not coords:
        raise StructureReadError("the pose has no heavy atoms", source=path, record=record)
    conformer = Chem.Conformer(len(coords))
    for i, xyz in enumerate(np.asarray(coords)):
        conformer.SetAtomPosition(i, xyz.tolist())
    mol.AddConformer(conformer, assignId=True)
    with rdkit_messages(), third_party_errors(path, "the pose's bonds", record):
        rdDetermineBonds.DetermineConnectivity(mol)
    for atom in mol.GetAtoms():  # hydrogens come from the template's valences
        atom.SetNoImplicit(False)
    return mol.GetMol()


def _from_template(pose: _Pose, template: Chem.Mol, path, record: str) -> Chem.Mol:
    heavy = _heavy_atom_molecule(pose, path, record)
    reference = Chem.RemoveHs(template)
    if heavy.GetNumAtoms() != reference.GetNumAtoms():
        raise StructureReadError(f"the SMILES template has {reference.GetNumAtoms()} heavy atoms, the pose "
                                 f"{heavy.GetNumAtoms()}: not the same molecule", source=path, record=record)
    with rdkit_messages() as messages:
        try:
            mol = AllChem.AssignBondOrdersFromTemplate(reference, heavy)
        except (ValueError, RuntimeError) as exc:
            raise StructureReadError("the SMILES template does not match the pose's atoms and bonds ("
                                     f"{rdkit_reason(messages, str(exc))}): not the same molecule, or a pose with "
                                     "broken geometry", source=path, record=record) from None
    return Chem.AddHs(mol, addCoords=True)


def _from_meeko(text: str, path) -> list[Chem.Mol]:
    """One molecule per pose, rebuilt by meeko from the file's REMARK SMILES lines."""
    try:
        from meeko import PDBQTMolecule, RDKitMolCreate
    except ImportError:
        raise StructureReadError("this PDBQT carries its bond orders in REMARK SMILES lines, which are read with "
                                 f"meeko: {MEEKO_HINT} (or give the ligand's SMILES, --smiles)", source=path) from None
    with rdkit_messages(), third_party_errors(path, "the PDBQT with meeko"):
        docked = PDBQTMolecule(text, is_dlg=False, skip_typing=True)
        mols = RDKitMolCreate.from_pdbqt_mol(docked)
    if not mols or mols[0] is None:
        raise StructureReadError("meeko could not rebuild the molecule from its REMARK SMILES lines", source=path)
    ligand = mols[0]
    return [Chem.Mol(ligand, confId=conformer.GetId()) for conformer in ligand.GetConformers()]


def _title(text: str, path: Path) -> str:
    found = next((m for m in map(_NAME.match, text.splitlines()) if m), None)
    if found:
        return found.group(1).strip()
    name = path.name
    return name[:name.lower().rindex(PDBQT_SUFFIX)] if PDBQT_SUFFIX in name.lower() else path.stem


def read_pdbqt_poses(path: str | PathLike, template: str | Chem.Mol | None = None) -> list[Chem.Mol]:
    """Every pose of a PDBQT file as an RDKit molecule with bond orders (see the module notes).

    Args:
        path: the PDBQT file (plain, .gz or .bz2).
        template: the ligand's SMILES (or an RDKit molecule) giving the bond orders; None: from the
            file's REMARK SMILES lines (needs meeko).

    Raises:
        StructureReadError: unreadable file, no atoms, a template that does not fit, or no source of
            bond orders (the message says what to give or install).
    """
    path = Path(path)
    text = read_text(path)
    poses = _poses(text)
    if not poses:
        raise StructureReadError("no ATOM/HETATM records: not a PDBQT pose file", source=path)
    if template is not None:
        reference = Chem.MolFromSmiles(template) if isinstance(template, str) else template
        if reference is None:
            raise StructureReadError(f"the SMILES template {template!r} cannot be parsed", source=path)
        mols = [_from_template(p, reference, path, f"pose {k + 1}") for k, p in enumerate(poses)]
    elif any(line.startswith("REMARK SMILES ") for line in poses[0].remarks):
        mols = _from_meeko(text, path)
    else:
        raise StructureReadError("a PDBQT file has no bond orders and this one carries no REMARK SMILES line: give "
                                 "the ligand's SMILES (--smiles SMILES, or a .smi/.csv file naming each ligand), or "
                                 "prepare the ligand with meeko, which writes them into the file", source=path)
    if len(mols) != len(poses):
        raise StructureReadError(f"{len(poses)} poses in the file but {len(mols)} rebuilt", source=path)
    title = _title(text, path)
    for k, (mol, pose) in enumerate(zip(mols, poses)):
        mol.SetProp("_Name", title if len(poses) == 1 else f"{title} pose {k + 1}")
        mol.SetProp("_geomol_source", str(path))
        mol.SetIntProp("_geomol_record", k)
        if pose.score is not None:
            mol.SetDoubleProp("docking_score", pose.score)
    return mols
