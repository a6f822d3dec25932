"""Reading input files safely: existence, gzip, emptiness, format, third-party errors and warnings.

Every reader of :mod:`geomol.data.io` starts here, so that a missing, empty, truncated or
unparseable file always ends as a :class:`~geomol.errors.GeomolError` naming the file, and the
warnings of Biopython and RDKit reach the user as one counted :class:`StructureWarning` per file
instead of one line per atom.
"""
from __future__ import annotations

import bz2
import gzip
import logging
import re
import warnings
import zlib
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Iterator

from rdkit import rdBase

from geomol.errors import GeomolError, StructureReadError

__all__ = ["StructureWarning", "read_text", "iter_text_lines", "detect_format", "third_party_errors", "rdkit_messages",
           "rdkit_reason", "warn_counted", "FORMATS"]

FORMATS = ("pdb", "cif", "sdf", "mol2")
_SUFFIX_FORMAT = {".pdb": "pdb", ".ent": "pdb", ".pdb1": "pdb", ".cif": "cif", ".mmcif": "cif",
                  ".sdf": "sdf", ".sd": "sdf", ".mol": "sdf", ".mol2": "mol2"}
_GZIP_MAGIC = re.compile(rb"\x1f\x8b")
_BZIP2_MAGIC = re.compile(rb"BZh[1-9]1AY&SY")  # header + block magic: an SDF title 'BZh...' is not bzip2


class StructureWarning(UserWarning):
    """Input was repaired or partly skipped while reading (the message says what and how often)."""


def read_text(path: str | PathLike) -> str:
    """The text of a file, possibly gzip- or bzip2-compressed (recognised by content, not name).

    Decoded as Latin-1 so that every byte stays one character: fixed-column formats keep their
    columns even when a file holds stray non-ASCII bytes.

    Raises:
        StructureReadError: the file is missing, not a regular file, unreadable, a corrupt or
            truncated compressed stream, or empty (only whitespace).
    """
    p = _checked_file(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise StructureReadError(f"cannot read file ({exc.strerror or exc})", source=path) from exc
    for magic, kind, decompress in ((_GZIP_MAGIC, "gzip", gzip.decompress), (_BZIP2_MAGIC, "bzip2", bz2.decompress)):
        if magic.match(data):
            try:
                data = decompress(data)
            except (OSError, EOFError, ValueError, zlib.error) as exc:
                raise StructureReadError(f"corrupt or truncated {kind} data ({exc})", source=path) from exc
    if not data.strip():
        raise StructureReadError("file is empty", source=path)
    return data.decode("latin-1")


def _checked_file(path: str | PathLike) -> Path:
    p = Path(path)
    if not p.exists():
        raise StructureReadError("file not found", source=path)
    if not p.is_file():
        raise StructureReadError("not a regular file", source=path)
    return p


def iter_text_lines(path: str | PathLike) -> Iterator[str]:
    """The lines of a file one at a time (without line ends), gzip or bzip2 decompressed on the fly.

    :func:`read_text` for files too large to hold in memory (screening libraries): compression is
    recognised by content, text is decoded as Latin-1, and a missing, unreadable or corrupt file
    raises a :class:`StructureReadError` naming it (a corrupt stream when the reading reaches it).
    """
    p = _checked_file(path)
    try:
        with open(p, "rb") as raw:
            head = raw.read(16)
            raw.seek(0)
            opener = next((o for magic, o in ((_GZIP_MAGIC, gzip.open), (_BZIP2_MAGIC, bz2.open)) if magic.match(head)),
                          None)
            stream = opener(raw, "rb") if opener else raw
            for line in stream:
                yield line.decode("latin-1").rstrip("\r\n")
    except (OSError, EOFError, ValueError, zlib.error) as exc:
        raise StructureReadError(f"cannot read file ({getattr(exc, 'strerror', None) or exc})", source=path) from exc


def detect_format(path: str | PathLike, text: str | None = None) -> str:
    """One of :data:`FORMATS`, from the file suffix (``.gz`` ignored), else from the content.

    Raises:
        StructureReadError: neither the suffix nor the content says which format it is.
    """
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2"):
        suffixes.pop()
    if suffixes and suffixes[-1] in _SUFFIX_FORMAT:
        return _SUFFIX_FORMAT[suffixes[-1]]
    text = read_text(path) if text is None else text
    head = text[:200_000]
    if "@<TRIPOS>MOLECULE" in head:
        return "mol2"
    if "\n$$$$" in head or "M  END" in head:
        return "sdf"
    if head.lstrip().startswith("data_") and "_atom_site." in head:
        return "cif"
    if "\nATOM  " in head or "\nHETATM" in head or head.startswith(("ATOM  ", "HETATM")):
        return "pdb"
    raise StructureReadError("unknown file format (expected PDB, mmCIF, SDF or MOL2)", source=path)


@contextmanager
def third_party_errors(source: str | PathLike, what: str, record: str | int | None = None) -> Iterator[None]:
    """Turn any exception of a third-party parser into a :class:`StructureReadError`.

    Our own :class:`GeomolError` passes unchanged; anything else raised inside (Biopython's
    ``PDBConstructionException``, a ``ValueError`` from a number column, RDKit's runtime errors)
    means that the file could not be read, and is reported as such with the parser's message.
    """
    try:
        yield
    except GeomolError:
        raise
    except Exception as exc:  # noqa: BLE001 - translating foreign errors is the point
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StructureReadError(f"cannot parse {what}: {message}", source=source, record=record) from exc


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().split("] ", 1)[-1].strip())


@contextmanager
def rdkit_messages() -> Iterator[list[str]]:
    """Capture RDKit's log messages (instead of printing them) and yield the list they fill.

    RDKit is switched once to logging through Python's ``rdkit`` logger (its messages still
    reach stderr outside this context); inside, the logger's handlers are replaced by one that
    collects the lines, so that a reader can quote RDKit's reason in its own error or warning.
    """
    rdBase.LogToPythonLogger()
    logger = logging.getLogger("rdkit")
    handler = _Collect()
    saved = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [handler], False
    try:
        yield handler.messages
    finally:
        logger.handlers, logger.propagate = saved


_NOT_A_REASON = ("", "****", "Stacktrace:")


def rdkit_reason(messages: list[str], default: str) -> str:
    """The informative part of captured RDKit messages (an invariant's header and what failed)."""
    lines = []
    for line in messages:
        if line.startswith(("Violation occurred", "----------")):
            break
        if line not in _NOT_A_REASON and not line.startswith("ERROR: moving to"):
            lines.append(line.removeprefix("ERROR: "))
    if not lines:
        return default
    return f"{lines[0]}: {lines[1]}" if lines[0].endswith("Violation") and len(lines) > 1 else lines[0]


def warn_counted(source: str | PathLike, what: str, count: int, example: str | None = None,
                 stacklevel: int = 3) -> None:
    """Emit one :class:`StructureWarning` for ``count`` occurrences of one problem in a file."""
    if count <= 0:
        return
    detail = f" (e.g. {example})" if example else ""
    warnings.warn(f"{source}: {count} × {what}{detail}", StructureWarning, stacklevel=stacklevel)
