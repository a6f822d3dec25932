"""Lists of SMILES from files: ``.smi`` (SMILES, then an optional name, per line) or CSV (a SMILES and a name column).

Only the text is read here; a SMILES that RDKit cannot parse is reported when the ligand is posed
(:mod:`geomol.data.posing.poses`), so that one bad line does not stop the others. Files may be gzip or
bzip2 compressed. Names default to ``#<index>`` (from 0, in file order). CSV columns are found by their
common names (:data:`SMILES_COLUMNS`, :data:`NAME_COLUMNS`; case, spaces, ``-`` and ``_`` do not matter:
``SMILES``, ``ligand_smiles``, ``Canonical SMILES``; ``name``, ``ligand_name``, ``ID`` ...) or named by the
caller (``smiles_column=``, ``name_column=``). Each entry's source names its line and, when given, its
name (``'series.csv [line 4 'lig_7']'``), for messages.
"""
from __future__ import annotations

import csv
from os import PathLike
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from geomol.data.io._source import iter_text_lines, read_text
from geomol.errors import StructureReadError

__all__ = ["SmilesEntry", "SMILES_SUFFIXES", "SMILES_COLUMNS", "NAME_COLUMNS", "read_smiles_file",
           "iter_smiles_file", "is_smiles_list"]

SMILES_SUFFIXES = (".smi", ".smiles", ".csv")
SMILES_COLUMNS = ("smiles", "ligand_smiles", "canonical_smiles", "isomeric_smiles", "compound_smiles",
                  "molecule_smiles", "mol_smiles", "smiles_string", "smi")
"""CSV column names taken for the SMILES, first match first (normalised: lower case, ``_`` for spaces and ``-``)."""
NAME_COLUMNS = ("name", "ligand_name", "ligand_id", "compound_name", "compound_id", "molecule_name", "title", "id",
                "ligand", "compound", "molecule", "mol_id", "cmpd_id", "molecule_chembl_id", "chembl_id")
"""CSV column names taken for the ligand name, first match first."""


class SmilesEntry(NamedTuple):
    """One ligand of a SMILES list: its name, SMILES and where it came from (``'file [line n]'``)."""

    name: str
    smiles: str
    source: str


def _suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2"):
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def _source(path: Path, line: int, name: str) -> str:
    return f"{path} [line {line} {name!r}]" if name else f"{path} [line {line}]"


def is_smiles_list(path: str | PathLike) -> bool:
    """True for a file name with a SMILES-list suffix (:data:`SMILES_SUFFIXES`, also compressed)."""
    return _suffix(Path(path)) in SMILES_SUFFIXES


def _smi_entries(lines: Iterable[str], path: Path) -> Iterator[SmilesEntry]:
    count = 0
    for number, line in enumerate(lines, start=1):
        fields = line.split(None, 1)
        if not fields or fields[0].startswith("#"):
            continue
        if not count and fields[0].lower() == "smiles":  # a header line
            continue
        name = fields[1].strip() if len(fields) > 1 else ""
        yield SmilesEntry(name or f"#{count}", fields[0], _source(path, number, name))
        count += 1


def _normalised(column: str) -> str:
    return "_".join(column.strip().lower().replace("-", " ").split())


def _column(fields: list[str], given: str | None, known: tuple[str, ...], what: str, path: Path) -> str | None:
    """The CSV column (as written) holding ``what``: ``given`` if set, else the first of ``known`` present."""
    by_name = {_normalised(f): f for f in fields}
    if given is not None:
        if _normalised(given) not in by_name:
            raise StructureReadError(f"no column {given!r} for the {what} (columns: {', '.join(fields)})", source=path)
        return by_name[_normalised(given)]
    return next((by_name[k] for k in known if k in by_name), None)


def _csv_entries(lines: Iterable[str], path: Path, smiles_column: str | None = None,
                 name_column: str | None = None) -> Iterator[SmilesEntry]:
    reader = csv.DictReader(lines)
    fields = [f for f in reader.fieldnames or [] if f is not None]
    smiles_field = _column(fields, smiles_column, SMILES_COLUMNS, "SMILES", path)
    if smiles_field is None:
        raise StructureReadError(f"no SMILES column: none of the columns ({', '.join(fields) or 'none'}) has a name "
                                 f"used for SMILES ({', '.join(SMILES_COLUMNS[:4])}, ...); name it with "
                                 "--smiles-column (smiles_column= in Python)", source=path)
    name_field = _column(fields, name_column, NAME_COLUMNS, "names", path)
    for count, row in enumerate(reader):
        smiles = (row.get(smiles_field) or "").strip()
        name = (row.get(name_field) or "").strip() if name_field else ""
        yield SmilesEntry(name or f"#{count}", smiles, _source(path, reader.line_num, name))


def _checked_suffix(path: Path) -> str:
    suffix = _suffix(path)
    if suffix not in SMILES_SUFFIXES:
        raise StructureReadError(f"expected a SMILES list ({', '.join(SMILES_SUFFIXES)}), "
                                 f"got {suffix or 'no suffix'!r}", source=path)
    return suffix


def _entries(lines: Iterable[str], path: Path, suffix: str, smiles_column: str | None = None,
             name_column: str | None = None) -> Iterator[SmilesEntry]:
    if suffix == ".csv":
        return _csv_entries(lines, path, smiles_column, name_column)
    return _smi_entries(lines, path)


def iter_smiles_file(path: str | PathLike, *, smiles_column: str | None = None,
                     name_column: str | None = None) -> Iterator[SmilesEntry]:
    """:func:`read_smiles_file` one entry at a time, streaming the file (a library of millions of SMILES).

    Raises:
        StructureReadError: as :func:`read_smiles_file`, when the reading reaches the problem (an empty
            file yields nothing).
    """
    path = Path(path)
    yield from _entries(iter_text_lines(path), path, _checked_suffix(path), smiles_column, name_column)


def read_smiles_file(path: str | PathLike, *, smiles_column: str | None = None,
                     name_column: str | None = None) -> list[SmilesEntry]:
    """The ligands of a ``.smi``/``.smiles`` or ``.csv`` file (plain, .gz or .bz2), in file order.

    ``.smi``: per line a SMILES and, after whitespace, an optional name; blank lines, lines starting
    with ``#`` and a first line ``smiles ...`` are skipped. CSV: a SMILES column and an optional name
    column, found by their common names or given as ``smiles_column`` / ``name_column`` (see the module
    notes); an empty SMILES cell is kept (it fails when posed, by name). The column options apply to
    CSV files only.

    Raises:
        StructureReadError: missing, empty or unreadable file, unknown suffix, no SMILES column (or no
            column of a given name), or no ligand at all.
    """
    path = Path(path)
    suffix = _checked_suffix(path)
    entries = list(_entries(read_text(path).splitlines(), path, suffix, smiles_column, name_column))
    if not entries:
        raise StructureReadError("no SMILES in the file", source=path)
    return entries
