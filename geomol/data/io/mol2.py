"""Proteins and nucleic acids from TRIPOS MOL2 files, into the same :class:`Structure` as PDB/mmCIF.

Receptors prepared for docking are often written as MOL2 (SYBYL atom types, one substructure per
residue). :func:`read_mol2_structure` reads one molecule of such a file:

* residues from the atoms' substructure fields (id and name: atoms of one id with different names,
  as converters that lose insertion codes write them, are different residues), described by the
  ``@<TRIPOS>SUBSTRUCTURE`` section where there is one: residue name from its ``sub_type`` column
  (else from the substructure name, ``ALA12`` / ``PRO-A2`` / ``HOH301``), chain from its ``chain``
  column (else from a name such as ``PRO-A2``), number from the name (else the substructure id);
* elements from the SYBYL atom types (``C.ar`` → C, ``N.am`` → N, ``O.co2`` → O, ``Cl`` → Cl);
  lone pairs (``LP``) and dummy atoms (``Du``) are not atoms: they are dropped and counted in a
  :class:`~geomol.data.io.StructureWarning`; any other type that names no element raises
  :class:`~geomol.errors.UnknownElementError`;
* waters removed, hydrogens dropped unless ``keep_hydrogens``, as for PDB files.

A MOL2 of a small molecule (no amino-acid or nucleotide residue) is refused with a
:class:`~geomol.errors.StructureReadError`: read it with :func:`~geomol.data.io.read_ligand`.
"""
from __future__ import annotations

import re
from os import PathLike
from typing import NamedTuple

import numpy as np

from geomol.data.io._source import warn_counted
from geomol.data.io.structure import Structure, is_polymer_residue
from geomol.data.vocab import ELEMENTS
from geomol.errors import StructureReadError, UnknownElementError

__all__ = ["read_mol2_structure", "sybyl_element"]

_CANONICAL = {e.upper(): e for e in ELEMENTS}
_NOT_ATOMS = frozenset({"LP", "DU"})  # lone pairs and dummy atoms (Du.C is a dummy carbon: an atom)
# substructure names: residue name ('ALA', 'HOH', or a digit-led PDB code '0G6'), then an optional chain
# after a separator and the residue number with an optional insertion code: 'ALA12', 'PRO-A2', 'HOH301B'
_NAME_HEAD = re.compile(r"^([A-Za-z]+|\d[A-Za-z0-9]{2})(.*)$")
_NAME_REST = re.compile(r"^[-_:]?(?:(?P<chain>[A-Za-z])[-_:]?)?(?P<number>-?\d+)(?P<icode>[A-Za-z]?)$")


class _Residue(NamedTuple):
    chain: str
    number: int
    icode: str
    resname: str


def sybyl_element(atom_type: str) -> str | None:
    """Element symbol of a SYBYL atom type (``'C.ar'`` → ``'C'``, ``'CL'`` → ``'Cl'``, ``'Du.C'`` → ``'C'``).

    Returns None for types that name no atom (lone pair ``LP``, dummy ``Du``) and for query types.
    """
    base, _, detail = atom_type.strip().partition(".")
    if base.upper() == "DU" and detail:
        base = detail
    if base.upper() in _NOT_ATOMS:
        return None
    return _CANONICAL.get(base.upper())


def _sections(text: str, source, model: int) -> dict[str, list[str]]:
    """Lines of each ``@<TRIPOS>`` section of molecule ``model`` (0 = first)."""
    molecules: list[dict[str, list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@<TRIPOS>"):
            name = line[9:].strip().upper()
            if name == "MOLECULE":
                molecules.append({})
            if molecules:
                current = molecules[-1].setdefault(name, [])
            continue
        if current is not None and line.strip() and not line.lstrip().startswith("#"):
            current.append(line)
    if not molecules:
        raise StructureReadError("no @<TRIPOS>MOLECULE record", source=source)
    if model >= len(molecules):
        raise StructureReadError(f"molecule {model} not found ({len(molecules)} molecules, numbered from 0)",
                                 source=source)
    sections = molecules[model]
    if not sections.get("ATOM"):
        raise StructureReadError("no @<TRIPOS>ATOM records", source=source)
    return sections


def _substructures(lines: list[str]) -> dict[str, tuple[str, str]]:
    """subst_id → (chain, sub_type) from the SUBSTRUCTURE section (empty strings where not given)."""
    table = {}
    for line in lines:
        fields = line.split()
        if len(fields) >= 2:
            chain = fields[5] if len(fields) > 5 and fields[5] != "****" else ""
            sub_type = fields[6] if len(fields) > 6 and fields[6] != "****" else ""
            table[fields[0]] = (chain, sub_type)
    return table


def _residue(subst_id: str, subst_name: str, described: tuple[str, str]) -> _Residue:
    """Chain, number, insertion code and name of a residue from its substructure id, name and description."""
    chain, sub_type = described
    if sub_type and subst_name.upper().startswith(sub_type.upper()):
        resname, rest = sub_type, subst_name[len(sub_type):]
    else:
        head = _NAME_HEAD.match(subst_name)
        resname, rest = (head.group(1), head.group(2)) if head else (subst_name, "")
    parts = _NAME_REST.match(rest)
    if parts is None:  # no number in the name ('ZN', 'CO' groups): the substructure id numbers it
        return _Residue(chain, int(subst_id) if subst_id.lstrip("-").isdigit() else 0, "", resname)
    return _Residue(chain or parts.group("chain") or "", int(parts.group("number")), parts.group("icode"), resname)


def _atom(line: str, number: int, source) -> tuple[str, tuple[float, float, float], str, str, str]:
    """(name, xyz Å, SYBYL type, subst_id, subst_name) of one ATOM line."""
    fields = line.split()
    if len(fields) < 6:
        raise StructureReadError(f"ATOM record with {len(fields)} fields (at least 6 expected)", source=source,
                                 record=f"atom line {number}")
    try:
        xyz = (float(fields[2]), float(fields[3]), float(fields[4]))
    except ValueError as exc:
        raise StructureReadError(f"bad coordinate ({exc})", source=source, record=f"atom line {number}") from exc
    subst_id = fields[6] if len(fields) > 6 else "1"
    subst_name = fields[7] if len(fields) > 7 else "****"
    return fields[1], xyz, fields[5], subst_id, subst_name


def read_mol2_structure(text: str, source: str | PathLike, *, keep_hydrogens: bool = False, model: int = 0,
                        waters: frozenset[str] = frozenset()) -> Structure:
    """Read molecule ``model`` of a MOL2 text as a receptor :class:`Structure` (see the module notes).

    Args:
        text: the file's text (decompressed). source: the file, for messages and labels.
        keep_hydrogens: keep hydrogen atoms. model: molecule index (0 = first).
        waters: residue names removed as water.

    Raises:
        StructureReadError: no molecule / atoms, malformed ATOM lines, non-finite coordinates, or
            no polymer residue (a small molecule).
        UnknownElementError: an atom type that names no element (other than LP and Du).
    """
    sections = _sections(text, source, model)
    described = _substructures(sections.get("SUBSTRUCTURE", []))
    residues: dict[tuple[str, str], _Residue] = {}
    coords, elements, names, residue_of = [], [], [], []
    not_atoms = 0
    for n, line in enumerate(sections["ATOM"], start=1):
        name, xyz, atom_type, subst_id, subst_name = _atom(line, n, source)
        element = sybyl_element(atom_type)
        if element is None:
            if atom_type.split(".")[0].upper() not in _NOT_ATOMS:
                raise UnknownElementError(f"atom type {atom_type!r} of atom {name!r} names no element",
                                          source=source, record=f"atom line {n}")
            not_atoms += 1
            continue
        key = (subst_id, subst_name)
        if key not in residues:
            residues[key] = _residue(subst_id, subst_name, described.get(subst_id, ("", "")))
        if residues[key].resname.upper() in waters or (element == "H" and not keep_hydrogens):
            continue
        coords.append(xyz)
        elements.append(element)
        names.append(name)
        residue_of.append(key)
    warn_counted(source, "lone pairs or dummy atoms (not atoms) dropped", not_atoms, stacklevel=4)
    shared_ids = len(residues) - len({subst_id for subst_id, _ in residues})
    warn_counted(source, "residues named apart under an already used substructure id (insertion codes lost?), "
                 "kept as separate residues", shared_ids, stacklevel=4)
    return _structure(source, coords, elements, names, residue_of, residues, keep_hydrogens)


def _structure(source, coords, elements, names, residue_of, residues, keep_hydrogens) -> Structure:
    """Group the atoms by residue (in order of first appearance) and check that it is a receptor."""
    order = {key: i for i, key in enumerate(dict.fromkeys(residue_of))}
    atoms = sorted(range(len(elements)), key=lambda i: order[residue_of[i]])  # stable: file order inside a residue
    kept = [residues[key] for key in order]
    if not any(is_polymer_residue(r.resname) for r in kept):
        raise StructureReadError("the MOL2 holds no amino-acid or nucleotide residue (a small molecule? read it "
                                 "with read_ligand, or give the ligand as --ligands)", source=source)
    counts = np.bincount([order[residue_of[i]] for i in atoms], minlength=len(kept))
    xyz = np.asarray(coords, dtype=np.float64).reshape(-1, 3)[atoms]
    if not np.isfinite(xyz).all():
        raise StructureReadError("non-finite atom coordinates", source=source)
    return Structure(str(source), xyz, [elements[i] for i in atoms], [names[i] for i in atoms],
                     np.concatenate([[0], np.cumsum(counts)]), [r.chain for r in kept], [r.number for r in kept],
                     [r.icode for r in kept], [r.resname for r in kept], hydrogens_kept=keep_hydrogens)
