"""Proteins and nucleic acids from PDB and mmCIF files (plain, gzip or bzip2).

(TRIPOS MOL2 receptors are read by :mod:`geomol.data.io.mol2` into the same :class:`Structure`;
:func:`read_structure` dispatches to it.)

:func:`read_structure` returns a :class:`~geomol.data.io.structure.Structure`:

* one model (the first by default);
* alternative locations resolved by highest occupancy (the first listed on a tie); for point
  mutations (one position, two residue names) the residue with the higher mean occupancy;
* insertion codes kept (block labels such as ``'A:42A:ALA'``);
* waters removed; hydrogens (and deuterium, read as hydrogen) dropped unless ``keep_hydrogens``;
* elements from the element column, inferred from the atom name when the column is blank.

Elements: a non-blank element column (mmCIF: ``type_symbol``) that is not a chemical element
raises :class:`~geomol.errors.UnknownElementError` naming the line (PDB) or the atom (mmCIF).
The PDB's own marker for an atom of unknown element, ``X`` (and a blank column whose atom name
gives no element), is *kept* as an atom of unknown type (atom type ``'m'``, block type unknown)
and counted in a :class:`~geomol.data.io.StructureWarning`: such atoms exist in deposited
structures (``UNX``) and the official vocabulary has a row for them. Blank element columns are
filled for force-field ion residues (``POT`` = K, ``SOD`` = Na, ...) and for hydrogens of polymer
residues (``H5''``, ``HD21``), whose names Biopython would misread.

Speed: the coordinate records of the requested model of a clean PDB file (element columns given,
nothing defined twice except as alternative locations; nearly every prepared receptor) are read by
:func:`~geomol.data.io.pdb_columns.read_clean_records`, column by column with NumPy, into the same
structure Biopython would give (a test checks this on real receptors), about 3× faster. Other records
go to Biopython: only the coordinate records of the requested model are handed to it,
without waters and (by default) without hydrogens whose element column says so. Python's garbage
collector is paused while Biopython builds its objects (their parent/child reference cycles
otherwise trigger repeated collections that cost about half of the parse), and the cycles are
broken once the arrays are copied out, so the objects are freed at once instead of by a later
collection.
"""
from __future__ import annotations

import gc
import io
import re
import warnings
from contextlib import contextmanager
from os import PathLike
from typing import Iterator

import numpy as np
from Bio.PDB import MMCIFParser, PDBParser

from geomol.data.io._source import detect_format, read_text, third_party_errors, warn_counted
from geomol.data.io.mol2 import read_mol2_structure
from geomol.data.io.pdb_columns import AtomLineTable, read_clean_records, single_model_atom_table
from geomol.data.io.structure import Structure, is_polymer_residue
from geomol.data.vocab import ELEMENTS
from geomol.errors import StructureReadError, UnknownElementError

__all__ = ["read_structure", "WATER_NAMES"]

WATER_NAMES = frozenset({"HOH", "WAT", "H2O", "DOD", "D2O", "TIP", "TIP3", "TIP4", "TIP5", "T3P", "T4P",
                         "SOL", "SPC", "SPCE"})
_HYDROGEN = frozenset({"H", "D"})
_UNKNOWN_ELEMENT = "X"
# upper-case element column → canonical symbol ('CL' → 'Cl'); deuterium is read as hydrogen
_CANONICAL = {e.upper(): e for e in ELEMENTS} | {"D": "H", _UNKNOWN_ELEMENT: _UNKNOWN_ELEMENT, "": _UNKNOWN_ELEMENT}
# Biopython messages that describe normal files (or that we count ourselves), not problems to report.
_BENIGN = ("is discontinuous", "Used element", "Could not assign element")
# Single-ion residues of force-field files, whose atom names (POT, SOD) would be misread as P, S.
_ION_RESIDUES = {"POT": "K", "SOD": "Na", "CLA": "Cl", "CAL": "Ca", "CES": "Cs", "LIT": "Li", "ZN2": "Zn",
                 "K+": "K", "NA+": "Na", "CL-": "Cl"}


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _release(bio_model) -> None:
    """Break the parent/child reference cycles of a Biopython structure.

    Every atom, residue, chain and model points to its parent and back; dropped as they are,
    the objects wait for a garbage collection that traverses all of them. Emptying the child
    lists lets reference counting free them at once, so pausing the collector costs nothing later.
    """
    if bio_model is None:
        return
    top = bio_model.get_parent()
    for model in top.child_list if top is not None else [bio_model]:
        for chain in model.child_list:
            for residue in chain.child_list:
                for part in residue.disordered_get_list() if residue.is_disordered() == 2 else [residue]:
                    part.child_list, part.child_dict = [], {}
            chain.child_list, chain.child_dict = [], {}
        model.child_list, model.child_dict, model.parent = [], {}, None
    if top is not None:
        top.child_list, top.child_dict = [], {}


def read_structure(path: str | PathLike, *, keep_hydrogens: bool = False, model: int = 0,
                   format: str | None = None) -> Structure:
    """Read one model of a PDB, mmCIF or MOL2 file (optionally gzip-compressed).

    Args:
        path: ``.pdb``/``.ent``/``.cif``/``.mmcif``/``.mol2``, optionally ``.gz``/``.bz2``; other names
            are sniffed.
        keep_hydrogens: keep hydrogen atoms (default: drop them, as the reference GET data does).
        model: index of the model to read (0 = first; for MOL2 the molecule).
        format: ``'pdb'``, ``'cif'`` or ``'mol2'`` to override detection.

    Raises:
        StructureReadError: missing, empty, truncated or unparseable file, no atoms left.
        UnknownElementError: an element column holds something that is not an element.
    """
    text = read_text(path)
    fmt = format or detect_format(path, text)
    if fmt == "mol2":
        return read_mol2_structure(text, path, keep_hydrogens=keep_hydrogens, model=model, waters=WATER_NAMES)
    if fmt not in ("pdb", "cif"):
        raise StructureReadError(f"expected a PDB or mmCIF file (or a MOL2 receptor), got {fmt.upper()}", source=path)
    records = _coordinate_records(text, path, model, keep_hydrogens) if fmt == "pdb" else None
    structure = read_clean_records(records[0], path, _CANONICAL, keep_hydrogens) if records else None
    if structure is None:
        structure = _read_with_biopython(text, path, model, keep_hydrogens, records)
    if structure.num_atoms == 0:
        raise StructureReadError("no atoms left after removing waters"
                                 + ("" if keep_hydrogens else " and hydrogens"), source=path)
    if not np.isfinite(structure.coords).all():
        raise StructureReadError("non-finite atom coordinates", source=path)
    return structure


def _read_with_biopython(text: str, path, model: int, keep_hydrogens: bool, records) -> Structure:
    """Parse with Biopython (mmCIF, and PDB records :func:`read_clean_records` does not take)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with third_party_errors(path, "structure"), _gc_paused():
            if records is not None:
                bio_model, marked_unknown = _parse_pdb(records), records[2]
            else:
                bio_model, marked_unknown = _parse_cif(text, path, model), frozenset()
            try:
                structure = _to_structure(bio_model, path, keep_hydrogens, marked_unknown)
            finally:
                _release(bio_model)
    _check_given_elements(caught, path)
    _report(caught, path)
    return structure


# ---------------------------------------------------------------------- PDB
def _atom_key(chain: str, number: str | int, icode: str, name: str) -> tuple[str, str, str, str]:
    return chain.strip(), str(number).strip(), icode.strip(), name.strip()


def _coordinate_records(text: str, source, model: int, keep_hydrogens: bool) -> tuple[list[str], list[int], set]:
    """The ATOM/HETATM lines of one model, without waters and (optionally) marked hydrogens.

    Also returns each kept line's number in the file (1-based: Biopython numbers the lines of the
    text it is given, which are only these) and the keys (:func:`_atom_key`) of atoms whose element
    column says ``X``: Biopython would replace that marker by a guess from the atom name (``UNK`` → uranium).

    A file of one model with plain newlines (nearly every receptor) is sifted column by column
    (:func:`_single_model_records`); any other goes line by line, with the same result.
    """
    if model == 0:
        table = single_model_atom_table(text)
        if table is not None:
            return _single_model_records(table, source, keep_hydrogens)
    return _coordinate_records_by_line(text, source, model, keep_hydrogens)


def _single_model_records(table: AtomLineTable, source, keep_hydrogens: bool) -> tuple[list[str], list[int], set]:
    """What :func:`_coordinate_records_by_line` gives for model 0 of a file without models, from its atom lines."""
    if table.num_atoms == 0:
        raise StructureReadError("no ATOM/HETATM records", source=source)
    water = table.per_code(17, 21, lambda code: code.strip() in WATER_NAMES, bool)
    column = table.per_code(76, 78, lambda code: code.strip().upper(), object)  # element column, upper case
    valid = table.per_code(76, 78, lambda code: code.strip().upper() in _CANONICAL, bool)
    bad = np.flatnonzero(~water & ~valid)
    if table.truncated_tail and (len(bad) == 0 or bad[0] == table.num_atoms - 1):
        raise StructureReadError("file ends in the middle of a record (truncated?)", source=source,
                                 record=f"line {table.line_number(table.num_atoms - 1)}")
    if len(bad):
        line = table.line(bad[0])
        raise UnknownElementError(
            f"element {column[bad[0]]!r} of atom {line[12:16].strip()!r} ({line[21:22]}:{line[22:27].strip()}:"
            f"{line[17:20].strip()}) is not a chemical element", source=source,
            record=f"line {table.line_number(bad[0])}")
    blank = table.per_code(76, 78, lambda code: not code.strip(), bool)
    lines = _with_blank_elements_filled(table, np.flatnonzero(~water & blank), column)
    dropped = water.copy()
    if not keep_hydrogens:
        dropped |= table.per_code(76, 78, lambda code: code.strip().upper() in _HYDROGEN, bool)
        for i in lines:  # hydrogens of polymer residues whose element column was blank
            dropped[i] |= column[i] in _HYDROGEN
    kept = np.flatnonzero(~dropped)
    records = table.lines(kept)
    for k in np.flatnonzero(np.isin(kept, list(lines))).tolist():
        records[k] = lines[int(kept[k])]
    marked_unknown = {_atom_key(records[k][21], records[k][22:26], records[k][26], records[k][12:16])
                      for k in np.flatnonzero(column[kept] == _UNKNOWN_ELEMENT).tolist()}
    return records, table.line_numbers(kept), marked_unknown


def _with_blank_elements_filled(table: AtomLineTable, blank: np.ndarray, column: np.ndarray) -> dict[int, str]:
    """The atom lines ``blank`` with an empty element column, given the element :func:`_blank_element` finds.

    Also writes that element into ``column`` (their element column, upper case).
    """
    lines = {}
    for i in blank.tolist():
        line = table.line(i)
        element = _blank_element(line[12:16].strip(), line[17:21].strip().upper())
        if element:
            lines[i], column[i] = f"{line[:76]:<76}{element:>2}{line[78:]}", element
    return lines


def _coordinate_records_by_line(text: str, source, model: int,
                                keep_hydrogens: bool) -> tuple[list[str], list[int], set]:
    """:func:`_coordinate_records` for any file, one line after the other."""
    lines = text.splitlines()
    truncated_tail = not text.endswith(("\n", "\r"))
    kept: list[str] = []
    numbers: list[int] = []
    marked_unknown = set()
    current, atoms_in_current, seen_atoms, last_length = 0, False, False, 0
    for n, line in enumerate(lines, start=1):
        record = line[:6]
        if record in ("MODEL ", "ENDMDL"):  # a model boundary; atoms before any MODEL are model 0
            current += atoms_in_current
            atoms_in_current = False
            if current > model:
                break
            continue
        if record not in ("ATOM  ", "HETATM"):
            continue
        if truncated_tail and n == len(lines) and len(line) < last_length:
            raise StructureReadError("file ends in the middle of a record (truncated?)", source=source,
                                     record=f"line {n}")
        atoms_in_current = seen_atoms = True
        last_length = len(line)
        if current != model or line[17:21].strip() in WATER_NAMES:
            continue
        element = line[76:78].strip().upper()
        if not element:
            element = _blank_element(line[12:16].strip(), line[17:21].strip().upper())
            line = f"{line[:76]:<76}{element:>2}{line[78:]}" if element else line
        if element in _HYDROGEN and not keep_hydrogens:
            continue
        if element not in _CANONICAL:
            raise UnknownElementError(
                f"element {element!r} of atom {line[12:16].strip()!r} ({line[21:22]}:{line[22:27].strip()}:"
                f"{line[17:20].strip()}) is not a chemical element", source=source, record=f"line {n}")
        if element == _UNKNOWN_ELEMENT:
            marked_unknown.add(_atom_key(line[21], line[22:26], line[26], line[12:16]))
        kept.append(line)
        numbers.append(n)
    if not seen_atoms:
        raise StructureReadError("no ATOM/HETATM records", source=source)
    if not kept and model > 0:
        raise StructureReadError(f"model {model} not found or without atoms (models are numbered from 0)",
                                 source=source)
    return kept, numbers, marked_unknown


def _blank_element(name: str, resname: str) -> str:
    """Element of an atom with a blank element column where Biopython's guess would fail or err.

    Force-field ion residues (POT = K); hydrogens of polymer residues, whose four-character names
    (``H5''``, ``HD21``) Biopython cannot read. Everything else is left to Biopython ('' returned).
    """
    if resname in _ION_RESIDUES:
        return _ION_RESIDUES[resname].upper()
    if name.lstrip("0123456789").startswith(("H", "D")) and is_polymer_residue(resname):
        return "H"
    return ""


def _parse_pdb(records: tuple[list[str], list[int], set]):
    """The Biopython model of the records :func:`_coordinate_records` kept (None without any)."""
    lines, numbers, _ = records
    if not lines:
        return None
    try:
        structure = PDBParser(PERMISSIVE=True, QUIET=False).get_structure("s", io.StringIO("\n".join(lines) + "\n"))
    except Exception as exc:  # noqa: BLE001 - re-raised with the file's line number
        raise _in_file_lines(exc, numbers) from exc
    return structure[0] if len(structure) else None


def _in_file_lines(exc: Exception, numbers: list[int]) -> Exception:
    """``exc`` with its "line N" (a line of the records Biopython was given) made the file's line."""
    match = re.search(r"\bline (\d+)", str(exc))
    if match is None or not 1 <= int(match.group(1)) <= len(numbers):
        return exc
    line = numbers[int(match.group(1)) - 1]
    try:
        return type(exc)(f"{str(exc)[:match.start()]}line {line}{str(exc)[match.end():]}")
    except Exception:  # noqa: BLE001 - an exception type with other arguments: keep it as it is
        return exc


# ---------------------------------------------------------------------- mmCIF
def _parse_cif(text: str, source, model: int):
    structure = MMCIFParser(QUIET=False).get_structure("s", io.StringIO(text))
    models = list(structure)
    if not models:
        raise StructureReadError("no atom records (_atom_site)", source=source)
    if model >= len(models):
        raise StructureReadError(f"model {model} not found ({len(models)} models, numbered from 0)", source=source)
    return models[model]


# ---------------------------------------------------------------------- Biopython → arrays
def _mean_occupancy(residue) -> float:
    occupancies = [a.occupancy or 0.0 for a in residue.get_unpacked_list()]
    return float(np.mean(occupancies)) if occupancies else 0.0


def _selected_residue(residue):
    """For a point mutation (one position, two residue names) the one of highest mean occupancy."""
    if residue.is_disordered() != 2:  # 2 marks Biopython's DisorderedResidue
        return residue
    return max(residue.disordered_get_list(), key=_mean_occupancy)


def _element(atom, source) -> str:
    element = _CANONICAL.get((atom.element or "").strip().upper())
    if element is None:  # an mmCIF type_symbol that is not an element
        raise UnknownElementError(f"element {atom.element!r} of atom {atom.get_name()!r} is not a chemical element",
                                  source=source, record=atom.get_parent().get_resname())
    return element


def _to_structure(bio_model, source, keep_hydrogens: bool, marked_unknown: set | frozenset) -> Structure:
    coords, elements, names, starts = [], [], [], [0]
    chains, numbers, icodes, resnames = [], [], [], []
    unknown = 0
    for chain in bio_model or ():
        for residue in chain:
            residue = _selected_residue(residue)
            hetflag, number, icode = residue.id
            resname = residue.get_resname().strip()
            if hetflag == "W" or resname.upper() in WATER_NAMES:
                continue
            before = len(elements)
            for atom in residue:
                atom = getattr(atom, "selected_child", atom)
                element = _element(atom, source)
                if marked_unknown and _atom_key(chain.id, number, icode, atom.get_name()) in marked_unknown:
                    element = _UNKNOWN_ELEMENT
                if element == "H" and not keep_hydrogens:
                    continue
                unknown += element == _UNKNOWN_ELEMENT
                coords.append(atom.coord)
                elements.append(element)
                names.append(atom.get_name())
            if len(elements) == before:
                continue
            starts.append(len(elements))
            chains.append(chain.id.strip())
            numbers.append(int(number))
            icodes.append(icode.strip())
            resnames.append(resname)
    warn_counted(source, "atoms of unknown element kept as unknown atom type", unknown, stacklevel=4)
    xyz = np.asarray(coords, dtype=np.float64).reshape(-1, 3)
    return Structure(str(source), xyz, elements, names, np.asarray(starts), chains, numbers, icodes, resnames,
                     hydrogens_kept=keep_hydrogens)


_GIVEN_ELEMENT = re.compile(r"element '?([^']*)'? for Atom \(name=(.*)\) with given element '([^']*)'")


def _check_given_elements(caught: list[warnings.WarningMessage], source) -> None:
    """Raise for an element field that is not an element (Biopython would silently guess one).

    PDB element columns are checked line by line before parsing; this catches mmCIF
    ``type_symbol`` values. Blank, ``?``, ``.`` (not given) and ``X`` (unknown) are allowed.
    """
    for w in caught:
        match = _GIVEN_ELEMENT.search(str(w.message))
        if match and match.group(3).strip() not in ("", "?", ".", _UNKNOWN_ELEMENT):
            raise UnknownElementError(f"element {match.group(3)!r} of atom {match.group(2)!r} is not a chemical "
                                      "element", source=source)


def _report(caught: list[warnings.WarningMessage], source) -> None:
    """Re-emit what Biopython warned about as one counted warning (benign notices dropped)."""
    problems = [str(w.message) for w in caught
                if "PDBConstruction" in type(w.message).__name__ and not any(b in str(w.message) for b in _BENIGN)]
    warn_counted(source, "structure records repaired or skipped by the parser", len(problems),
                 problems[0] if problems else None, stacklevel=4)
    for w in caught:  # warnings of our own pass through unchanged
        if "PDBConstruction" not in type(w.message).__name__:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
