"""Lists of SMILES from files: ``.smi`` (SMILES, then an optional name, per line) or CSV (``smiles``, ``name``).

Only the text is read here; a SMILES that RDKit cannot parse is reported when the ligand is posed
(:mod:`geomol.data.posing.poses`), so that one bad line does not stop the others. Files may be gzip or
bzip2 compressed. Names default to ``#<index>`` (from 0, in file order).
"""
from __future__ import annotations

import csv
from os import PathLike
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from geomol.data.io._source import iter_text_lines, read_text
from geomol.errors import StructureReadError

__all__ = ["SmilesEntry", "SMILES_SUFFIXES", "read_smiles_file", "iter_smiles_file"]

SMILES_SUFFIXES = (".smi", ".smiles", ".csv")


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


def _smi_entries(lines: Iterable[str], path: Path) -> Iterator[SmilesEntry]:
    count = 0
    for number, line in enumerate(lines, start=1):
        fields = line.split(None, 1)
        if not fields or fields[0].startswith("#"):
            continue
        if not count and fields[0].lower() == "smiles":  # a header line
            continue
        name = fields[1].strip() if len(fields) > 1 else ""
        yield SmilesEntry(name or f"#{count}", fields[0], f"{path} [line {number}]")
        count += 1


def _csv_entries(lines: Iterable[str], path: Path) -> Iterator[SmilesEntry]:
    reader = csv.DictReader(lines)
    columns = {c.strip().lower(): c for c in reader.fieldnames or []}
    if "smiles" not in columns:
        raise StructureReadError(f"no 'smiles' column (columns: {reader.fieldnames})", source=path)
    for count, row in enumerate(reader):
        smiles = (row.get(columns["smiles"]) or "").strip()
        name = (row.get(columns["name"]) or "").strip() if "name" in columns else ""
        yield SmilesEntry(name or f"#{count}", smiles, f"{path} [line {reader.line_num}]")


def _checked_suffix(path: Path) -> str:
    suffix = _suffix(path)
    if suffix not in SMILES_SUFFIXES:
        raise StructureReadError(f"expected a SMILES list ({', '.join(SMILES_SUFFIXES)}), "
                                 f"got {suffix or 'no suffix'!r}", source=path)
    return suffix


def _entries(lines: Iterable[str], path: Path, suffix: str) -> Iterator[SmilesEntry]:
    return _csv_entries(lines, path) if suffix == ".csv" else _smi_entries(lines, path)


def iter_smiles_file(path: str | PathLike) -> Iterator[SmilesEntry]:
    """:func:`read_smiles_file` one entry at a time, streaming the file (a library of millions of SMILES).

    Raises:
        StructureReadError: as :func:`read_smiles_file`, when the reading reaches the problem (an empty
            file yields nothing).
    """
    path = Path(path)
    yield from _entries(iter_text_lines(path), path, _checked_suffix(path))


def read_smiles_file(path: str | PathLike) -> list[SmilesEntry]:
    """The ligands of a ``.smi``/``.smiles`` or ``.csv`` file (plain, .gz or .bz2), in file order.

    ``.smi``: per line a SMILES and, after whitespace, an optional name; blank lines, lines starting
    with ``#`` and a first line ``smiles ...`` are skipped. CSV: a ``smiles`` column and an optional
    ``name`` column (case-insensitive); an empty SMILES cell is kept (it fails when posed, by name).

    Raises:
        StructureReadError: missing, empty or unreadable file, unknown suffix, no ``smiles`` column,
            or no ligand at all.
    """
    path = Path(path)
    suffix = _checked_suffix(path)
    entries = list(_entries(read_text(path).splitlines(), path, suffix))
    if not entries:
        raise StructureReadError("no SMILES in the file", source=path)
    return entries
