"""Small molecules from SDF and MOL2 files (multi-molecule, plain, gzip or bzip2), parsed with RDKit.

Each record is parsed on its own, so one bad molecule names itself (file and record index) and
does not hide the others. Molecules keep all their atoms (hydrogens included); what a graph
keeps is decided later by :func:`~geomol.data.io.ligand.ligand_blocks`.

Sanitisation: a record that RDKit can read but not sanitise (impossible valence, bad aromaticity)
is kept unsanitised -- coordinates, elements and bonds as written -- with a
:class:`~geomol.data.io.StructureWarning` that names the file, the molecule and RDKit's reason.
A record RDKit cannot read at all (corrupt counts line, missing atom block, unknown element)
raises :class:`~geomol.errors.StructureReadError`.

Every molecule carries its title as ``_Name``, SDF data items as string properties
(``mol.GetPropsAsDict()``), and the private properties ``_geomol_source`` (the file) and
``_geomol_record`` (its index in the file), which the complex builders quote in errors.
"""
from __future__ import annotations

import warnings
from itertools import islice
from os import PathLike
from typing import Callable, Iterator

from rdkit import Chem

from geomol.data.io._source import (
    StructureWarning,
    detect_format,
    rdkit_messages,
    rdkit_reason,
    read_text,
    third_party_errors,
)
from geomol.data.io.rdkit_hints import mol2_atom_type_problem, sanitisation_hint
from geomol.errors import LigandNotFoundError, StructureReadError

__all__ = ["read_ligand", "read_ligands", "ligand_names", "molecule_source"]

_MOL2_HEADER = "@<TRIPOS>MOLECULE"
_SDF_END = "\n$$$$"
_MOLFILE_END = "M  END"
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # where str.splitlines cuts


# ---------------------------------------------------------------------- records
def _sdf_records(text: str) -> Iterator[str]:
    """Molfile records of an SD file, lazily in file order.

    Records end at ``$$$$`` lines (a ``$$$$`` followed by text on its line is record text, not an
    end); a final record may lack one, and is left out when blank. Each record ends with a
    newline. Lazy, so that reading one molecule scans the file only up to that molecule.
    """
    text = "\n" + text  # every end mark is then '\n$$$$', the first line included
    mark = text.find(_SDF_END)
    start = 0 if mark == 0 else 1  # a first line '$$$$...' that is no end keeps its newline
    while mark != -1:
        line_end = text.find("\n", mark + len(_SDF_END))
        if not text[mark + len(_SDF_END):line_end if line_end != -1 else len(text)].strip():
            yield text[start:mark] + "\n"
            start = _after_end_line(text, line_end)
        mark = text.find(_SDF_END, mark + len(_SDF_END))
    if text[start:].strip():
        yield text[start:] + "\n"


def _after_end_line(text: str, line_end: int) -> int:
    """Where the record after an end mark whose line ends at ``line_end`` (-1: at the end of the text) starts.

    That is the next line, unless the next line is itself an end mark: then the record starts at
    the mark's newline, so that it is empty (or holds the mark, when the mark is not an end).
    """
    if line_end == -1:
        return len(text)
    return line_end if text.startswith(_SDF_END, line_end) else line_end + 1


def _mol2_records(text: str) -> list[str]:
    """Records of a MOL2 file, each starting at its ``@<TRIPOS>MOLECULE`` line."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(_MOL2_HEADER)]
    return ["".join(lines[a:b]) for a, b in zip(starts, starts[1:] + [len(lines)])]


def _title(fmt: str, record: str) -> str:
    lines = record.splitlines()
    index = 1 if fmt == "mol2" else 0  # MOL2: the line after @<TRIPOS>MOLECULE
    return lines[index].strip() if len(lines) > index else ""


def _lines_after_end(record: str) -> list[str]:
    """The lines (as ``str.splitlines`` cuts them) after the first line that starts with ``M  END``."""
    at = record.find(_MOLFILE_END)
    while at > 0 and record[at - 1] not in _LINE_BREAKS:  # found inside a line: look further
        at = record.find(_MOLFILE_END, at + 1)
    return [] if at == -1 else record[at:].splitlines()[1:]


def _data_item_name(header: str) -> str | None:
    """NAME of a data header line ``> <NAME> ...``; None when it has no ``<`` followed later by ``>``."""
    opening = header.find("<")
    closing = header.find(">", opening) if opening != -1 else -1
    return header[opening + 1:closing] if closing != -1 else None


def _sd_properties(record: str) -> dict[str, str]:
    """SDF data items after ``M  END``: ``> <NAME>`` header lines, values up to a blank line."""
    props: dict[str, str] = {}
    name, values = None, []
    for line in _lines_after_end(record) + [""]:
        if name is None:
            if line.startswith(">"):
                name, values = _data_item_name(line), []
        elif line.strip():
            values.append(line)
        else:
            props[name] = "\n".join(values)
            name = None
    return props


def _file_text(path) -> tuple[str, str]:
    """(format, text) of an SDF or MOL2 file."""
    text = read_text(path)
    fmt = detect_format(path, text)
    if fmt not in ("sdf", "mol2"):
        raise StructureReadError(f"expected an SDF or MOL2 file, got {fmt.upper()}", source=path)
    return fmt, text


def _all_records(fmt: str, text: str, path) -> list[str]:
    records = list(_sdf_records(text)) if fmt == "sdf" else _mol2_records(text)
    if not records:
        raise StructureReadError(f"no molecule records in {fmt.upper()} file", source=path)
    return records


def _records(path) -> tuple[str, list[str]]:
    fmt, text = _file_text(path)
    return fmt, _all_records(fmt, text, path)


def _chosen_record(fmt: str, text: str, path, which: int | str) -> tuple[int, str]:
    """(index, record) of molecule ``which`` (index or title) of a file's text.

    Raises:
        StructureReadError: the file has no records. LigandNotFoundError: no such molecule.
    """
    if fmt == "sdf" and isinstance(which, int) and which >= 0:  # the common case: scan only up to it
        record = next(islice(_sdf_records(text), which, None), None)
        if record is not None:
            return int(which), record
    records = _all_records(fmt, text, path)
    if isinstance(which, str):
        titles = [_title(fmt, r) for r in records]
        if which not in titles:
            raise LigandNotFoundError(f"no molecule titled {which!r} ({len(titles)} molecules)", source=path)
        index = titles.index(which)
    else:
        index = int(which)
        if not -len(records) <= index < len(records):
            raise LigandNotFoundError(f"no molecule {index} ({len(records)} molecules)", source=path)
        index %= len(records)
    return index, records[index]


# ---------------------------------------------------------------------- parsing
def _parse_record(fmt: str, record: str, path, index: int, sanitize: bool) -> Chem.Mol:
    where = f"molecule {index} {_title(fmt, record)!r}"
    typing = mol2_atom_type_problem(record) if fmt == "mol2" else None
    if typing:
        raise StructureReadError(typing, source=path, record=where)
    mol = _raw_molecule(fmt, record, path, where)
    if sanitize:
        mol = _sanitized_or_raw(mol, lambda: _raw_molecule(fmt, record, path, where), path, where)
    mol.SetProp("_geomol_source", str(path))
    mol.SetIntProp("_geomol_record", index)
    return mol


def _raw_molecule(fmt: str, record: str, path, where: str) -> Chem.Mol:
    """The molecule of a record as written (not sanitised), with its SDF data items as properties."""
    with rdkit_messages() as messages, third_party_errors(path, "molecule", where):
        if fmt == "sdf":
            mol = Chem.MolFromMolBlock(record, sanitize=False, removeHs=False, strictParsing=True)
        else:
            mol = Chem.MolFromMol2Block(record, sanitize=False, removeHs=False)
    if mol is None:
        raise StructureReadError(f"RDKit cannot read the molecule: {rdkit_reason(messages, 'malformed or incomplete record')}",
                                 source=path, record=where)
    if mol.GetNumAtoms() == 0:
        raise StructureReadError("molecule has no atoms", source=path, record=where)
    if mol.GetNumConformers() == 0:
        raise StructureReadError("molecule has no coordinates", source=path, record=where)
    if fmt == "sdf":
        for key, value in _sd_properties(record).items():
            mol.SetProp(key, value)
    return mol


def _sanitized_or_raw(mol: Chem.Mol, read_raw: Callable[[], Chem.Mol], path, where: str) -> Chem.Mol:
    """``mol`` sanitised in place, or the raw molecule (coordinates and elements intact) with a warning.

    A failed sanitisation leaves ``mol`` half changed, so the raw molecule is then read again
    (``read_raw()``): rare, and cheaper than copying every molecule before sanitising it.
    """
    with rdkit_messages() as messages:
        failed = Chem.SanitizeMol(mol, catchErrors=True)
    if failed == Chem.SanitizeFlags.SANITIZE_NONE:
        return mol
    reason = sanitisation_hint(rdkit_reason(messages, str(failed)))
    mol = read_raw()
    mol.SetProp("_geomol_sanitize_error", reason)  # the prediction checks report it with the ligand
    warnings.warn(f"{path} [{where}]: RDKit sanitisation failed ({reason}); using the unsanitised molecule "
                  "(coordinates, elements and bonds as written)", StructureWarning, stacklevel=4)
    mol.UpdatePropertyCache(strict=False)
    return mol


# ---------------------------------------------------------------------- public API
def ligand_names(path: str | PathLike) -> list[str]:
    """Titles (``_Name``) of the molecules of an SDF or MOL2 file, in file order (no parsing)."""
    fmt, records = _records(path)
    return [_title(fmt, r) for r in records]


def read_ligand(path: str | PathLike, which: int | str = 0, *, sanitize: bool = True) -> Chem.Mol:
    """One molecule of an SDF or MOL2 file, by index (from 0; negative counts from the end) or title.

    Raises:
        StructureReadError: unreadable file or record (see the module notes on sanitisation).
        LigandNotFoundError: no molecule with that index or title.
    """
    fmt, text = _file_text(path)
    index, record = _chosen_record(fmt, text, path, which)
    return _parse_record(fmt, record, path, index, sanitize)


def read_ligands(path: str | PathLike, *, sanitize: bool = True, skip_invalid: bool = False) -> list[Chem.Mol]:
    """All molecules of an SDF or MOL2 file, in file order.

    Args:
        skip_invalid: skip records RDKit cannot read (one counted warning) instead of raising.
    """
    fmt, records = _records(path)
    mols, skipped = [], []
    for index, record in enumerate(records):
        try:
            mols.append(_parse_record(fmt, record, path, index, sanitize))
        except StructureReadError as exc:
            if not skip_invalid:
                raise
            skipped.append(exc)
    if skipped:
        warnings.warn(f"{path}: skipped {len(skipped)} unreadable molecule(s), e.g. {skipped[0]}",
                      StructureWarning, stacklevel=2)
    if not mols:
        raise StructureReadError("no readable molecule", source=path)
    return mols


def molecule_source(mol: Chem.Mol) -> str:
    """``'file [record]'`` of a molecule read here, or its title for any other molecule."""
    name = mol.GetProp("_Name") if mol.HasProp("_Name") else ""
    if mol.HasProp("_geomol_source"):
        return f"{mol.GetProp('_geomol_source')} [molecule {mol.GetIntProp('_geomol_record')} {name!r}]"
    return f"molecule {name!r}" if name else "molecule"
