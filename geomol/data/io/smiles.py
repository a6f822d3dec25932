"""Lists of SMILES from files: ``.smi`` (SMILES, then an optional name, per line) or CSV (``smiles``, ``name``).

Only the text is read here; a SMILES that RDKit cannot parse is reported when the ligand is posed
(:mod:`geomol.data.posing.poses`), so that one bad line does not stop the others. Files may be gzip or
bzip2 compressed. Names default to ``#<index>`` (from 0, in file order).
"""
from __future__ import annotations

import csv
import io
from os import PathLike
from pathlib import Path
from typing import NamedTuple

from geomol.data.io._source import read_text
from geomol.errors import StructureReadError

__all__ = ["SmilesEntry", "SMILES_SUFFIXES", "read_smiles_file"]

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


def _smi_entries(text: str, path: Path) -> list[SmilesEntry]:
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split(None, 1)
        if not fields or fields[0].startswith("#"):
            continue
        if not entries and fields[0].lower() == "smiles":  # a header line
            continue
        name = fields[1].strip() if len(fields) > 1 else ""
        entries.append(SmilesEntry(name or f"#{len(entries)}", fields[0], f"{path} [line {number}]"))
    return entries


def _csv_entries(text: str, path: Path) -> list[SmilesEntry]:
    reader = csv.DictReader(io.StringIO(text))
    columns = {c.strip().lower(): c for c in reader.fieldnames or []}
    if "smiles" not in columns:
        raise StructureReadError(f"no 'smiles' column (columns: {reader.fieldnames})", source=path)
    entries = []
    for number, row in enumerate(reader, start=2):
        smiles = (row.get(columns["smiles"]) or "").strip()
        name = (row.get(columns["name"]) or "").strip() if "name" in columns else ""
        entries.append(SmilesEntry(name or f"#{len(entries)}", smiles, f"{path} [line {number}]"))
    return entries


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
    suffix = _suffix(path)
    if suffix not in SMILES_SUFFIXES:
        raise StructureReadError(f"expected a SMILES list ({', '.join(SMILES_SUFFIXES)}), "
                                 f"got {suffix or 'no suffix'!r}", source=path)
    text = read_text(path)
    entries = _csv_entries(text, path) if suffix == ".csv" else _smi_entries(text, path)
    if not entries:
        raise StructureReadError("no SMILES in the file", source=path)
    return entries
