"""A compound library read as a stream and cut into shards, never loaded whole.

Formats (plain, ``.gz`` or ``.bz2``, compression recognised by content):

* ``.smi`` / ``.smiles``: a SMILES and an optional name per line; ``.csv``: columns ``smiles`` and
  optional ``name`` (:mod:`geomol.data.io.smiles`, whose readers this streams);
* ``.sdf`` / ``.sd``: molecule records; each record's text travels to the worker, which turns it into
  a SMILES there (coordinates in the file are not used: every ligand is posed on the reference).

Every entry has its position in the library (``index``, from 0): the identity a screen keeps its
results by, so a name given twice is still two ligands, and none is counted twice. A shard is
``shard_size`` consecutive entries; its number and the digest of its entries let a resumed run skip
exactly the shards that an earlier run completed on the same library.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Iterator, NamedTuple

from geomol.data.io._source import iter_text_lines
from geomol.data.io.smiles import SMILES_SUFFIXES, iter_smiles_file
from geomol.errors import ConfigError, StructureReadError

__all__ = ["LibraryEntry", "Shard", "library_format", "iter_library", "count_library", "iter_shards"]

SDF_SUFFIXES = (".sdf", ".sd")


class LibraryEntry(NamedTuple):
    """One ligand of a library: its position, name, text (a SMILES, or an SD record) and origin for messages."""

    index: int
    name: str
    text: str
    source: str


@dataclass(frozen=True)
class Shard:
    """``entries`` of a library, consecutive from ``entries[0].index``; one task of a screen.

    Attributes:
        number: the shard's position (0, 1, ...); its files are named after it.
        fmt: ``'smiles'`` or ``'sdf'`` (what ``entries[i].text`` holds).
        entries: the ligands.
    """

    number: int
    fmt: str
    entries: tuple[LibraryEntry, ...]

    @property
    def digest(self) -> str:
        """SHA-1 of the entries' names and texts: the same shard of the same library has the same digest."""
        h = hashlib.sha1()
        for entry in self.entries:
            h.update(f"{entry.index}\t{entry.name}\t{entry.text}\n".encode())
        return h.hexdigest()


def library_format(path: str | PathLike) -> str:
    """``'smiles'`` or ``'sdf'`` from the file name (``.gz``/``.bz2`` ignored).

    Raises:
        StructureReadError: another suffix.
    """
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2"):
        suffixes.pop()
    suffix = suffixes[-1] if suffixes else ""
    if suffix in SMILES_SUFFIXES:
        return "smiles"
    if suffix in SDF_SUFFIXES:
        return "sdf"
    raise StructureReadError(f"a library is a SMILES list ({', '.join(SMILES_SUFFIXES)}) or an SD file "
                             f"({', '.join(SDF_SUFFIXES)}), optionally .gz/.bz2; got {suffix or 'no suffix'!r}",
                             source=path)


def _sdf_record(lines: list[str], count: int, path: Path, first_line: int) -> LibraryEntry:
    title = lines[0].strip()
    return LibraryEntry(count, title or f"#{count}", "\n".join(lines) + "\n",
                        f"{path} [molecule {count}, line {first_line}]")


def _sdf_entries(path: Path) -> Iterator[LibraryEntry]:
    lines: list[str] = []
    first_line = count = 0
    for number, line in enumerate(iter_text_lines(path), start=1):
        if not line.startswith("$$$$"):
            lines.append(line)
            continue
        if any(text.strip() for text in lines):
            yield _sdf_record(lines, count, path, first_line + 1)
            count += 1
        lines, first_line = [], number
    if any(text.strip() for text in lines):  # a last record without its $$$$ line
        yield _sdf_record(lines, count, path, first_line + 1)


def iter_library(path: str | PathLike) -> Iterator[LibraryEntry]:
    """The entries of a library file in order, one at a time (constant memory).

    Raises:
        StructureReadError: missing, unreadable or corrupt file, unknown suffix, or a CSV without a
            ``smiles`` column.
    """
    path = Path(path)
    if library_format(path) == "sdf":
        yield from _sdf_entries(path)
        return
    for index, entry in enumerate(iter_smiles_file(path)):
        yield LibraryEntry(index, entry.name, entry.smiles, entry.source)


def count_library(path: str | PathLike) -> int:
    """How many entries :func:`iter_library` yields (one streaming pass, for progress and ETA).

    Raises:
        StructureReadError: as :func:`iter_library`, or a library without any entry.
    """
    count = sum(1 for _ in iter_library(path))
    if count == 0:
        raise StructureReadError("the library holds no ligand", source=path)
    return count


def iter_shards(path: str | PathLike, shard_size: int) -> Iterator[Shard]:
    """The library cut into shards of ``shard_size`` consecutive entries (the last may be shorter)."""
    if shard_size < 1:
        raise ConfigError(f"the shard size must be ≥ 1, got {shard_size}")
    fmt = library_format(path)
    batch: list[LibraryEntry] = []
    number = 0
    for entry in iter_library(path):
        batch.append(entry)
        if len(batch) == shard_size:
            yield Shard(number, fmt, tuple(batch))
            batch, number = [], number + 1
    if batch:
        yield Shard(number, fmt, tuple(batch))
