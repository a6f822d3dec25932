"""Uploaded files: decoded, identified by their content (never by the name the client gave), counted, staged.

The web process only looks at the text (no RDKit, no torch): what kind of file it is, how many ligands it
holds. The real reading happens in a worker process through :func:`geomol.api.predict_affinity`, under the
job's time limit, so a file that crashes or stalls a parser cannot take the web server with it.

Files are written under names the server makes (``receptor.pdb``, ``ligands.sdf``, ...: the role and the
kind found in the content), so nothing a client sends becomes part of a path.
"""
from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from dataclasses import dataclass

from geomol.errors import GeomolError

__all__ = ["UploadError", "UploadedFile", "UnpackBudget", "ROLE_KINDS", "SMILES_KINDS", "decode_upload", "identify",
           "count_ligands", "read_upload", "smiles_text_upload"]

ROLE_KINDS = {
    "receptor": ("pdb", "cif"),
    "ligands": ("sdf", "mol2", "pdbqt", "smi", "csv"),
    "reference": ("sdf", "mol2"),
    "measured": ("csv",),
}
"""What each upload may be, by role."""
SMILES_KINDS = ("smi", "csv")
_CSV_COLUMNS = {"ligands": ({"smiles"},), "measured": ({"name", "pk"}, {"name", "dg_kcal_mol"})}
"""The columns (any one set, case-insensitive) a CSV needs in each role."""
_KIND_NAMES = {"pdb": "a PDB structure", "cif": "an mmCIF structure", "sdf": "an SD file", "mol2": "a MOL2 file",
               "pdbqt": "a PDBQT file", "smi": "a SMILES list", "csv": "a CSV table",
               "csv-other": "a CSV table without the columns needed"}
_ROLE_NEEDS = {"receptor": "a PDB or mmCIF receptor (plain or gzip)",
               "ligands": "posed ligands (SDF, MOL2, PDBQT) or SMILES (.smi lines or a CSV with a 'smiles' column)",
               "reference": "a reference ligand pose (SDF or MOL2)",
               "measured": "a CSV with a 'name' column and a 'pK' or 'dG_kcal_mol' column"}
_SMILES_TOKEN = re.compile(r"^[A-Za-z0-9@+\-\[\]()=#$%/\\.:*~&!,^]+$")
_PDBQT_MARK = re.compile(r"^(ROOT|ENDROOT|BRANCH|ENDBRANCH|TORSDOF|REMARK VINA)\b", re.M)
_ATOM_RECORD = re.compile(r"^(ATOM  |HETATM)", re.M)


class UploadError(GeomolError):
    """An upload the server refuses; ``status`` is the HTTP status and ``limit`` names a limit it broke."""

    def __init__(self, reason: str, source: str | None = None, *, status: int = 422, limit: str | None = None):
        super().__init__(reason, source=source)
        self.status, self.limit = status, limit


@dataclass(frozen=True)
class UploadedFile:
    """One accepted upload: its role, the kind its content shows, its text and its ligand count (ligands only)."""

    role: str
    kind: str
    text: str
    ligands: int = 0

    @property
    def file_name(self) -> str:
        """The server's name for it inside the job folder (``ligands.sdf``)."""
        return f"{self.role}.{self.kind}"

    @property
    def is_smiles(self) -> bool:
        return self.kind in SMILES_KINDS


class UnpackBudget:
    """The bytes all files (and the SMILES text) of one request may take once gzip is undone: one budget per request,
    charged as each file is decoded, so that two files under the limit cannot together pass it."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.left = max_bytes, max_bytes

    def _refuse(self, label: str) -> UploadError:
        return UploadError(f"uncompressed, the files of this request exceed this server's limit of {self.max_bytes} "
                           "bytes for all files of one job together", label, status=413, limit="max_request_bytes")

    def take(self, size: int, label: str) -> None:
        if size > self.left:
            raise self._refuse(label)
        self.left -= size

    def gunzip(self, data: bytes, label: str) -> bytes:
        """``data`` decompressed, reading at most one byte past what is left (a gzip bomb never unpacks whole)."""
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            out = stream.read(self.left + 1)
        self.take(len(out), label)
        return out


def decode_upload(data: bytes, label: str, budget: UnpackBudget) -> str:
    """The text of an upload: gzip undone (charged to the request's ``budget``), UTF-8 (or Latin-1) with no NUL byte.

    Raises:
        UploadError: 413 when the request's files together pass the budget; 415 for binary or corrupt content.
    """
    if data[:2] == b"\x1f\x8b":
        try:
            data = budget.gunzip(data, label)
        except (OSError, EOFError, zlib.error) as exc:
            raise UploadError(f"not a valid gzip file ({exc})", label, status=415) from None
    else:
        budget.take(len(data), label)
    if b"\x00" in data[:65536]:
        raise UploadError("binary content, not a text file", label, status=415)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _first_row(text: str) -> list[str]:
    try:
        return [c.strip().lower() for c in next(csv.reader(io.StringIO(text)), [])]
    except csv.Error:
        return []


def _is_smiles(token: str) -> bool:
    """Whether ``token`` is written like a SMILES: its characters, and outside brackets only the organic subset."""
    if not _SMILES_TOKEN.match(token):
        return False
    bare = re.sub(r"Cl|Br", "", re.sub(r"\[[^\]]*\]", "", token))
    return not re.search(r"[^BCNOPSFIbcnops\W\d_]", bare)


def _looks_like_smiles_list(text: str) -> bool:
    lines = [line.split() for line in text.splitlines()[:200] if line.strip() and not line.startswith("#")]
    if lines and lines[0][0].lower() == "smiles":
        lines = lines[1:]
    return bool(lines) and all(_is_smiles(fields[0]) for fields in lines)


def identify(text: str) -> str | None:
    """The kind of a text file by its content: one of the kinds of :data:`ROLE_KINDS`, or None."""
    head = text[:200_000]
    if "@<TRIPOS>MOLECULE" in head:
        return "mol2"
    if "\n$$$$" in head or re.search(r"^M  END", head, re.M):
        return "sdf"
    if head.lstrip().startswith("data_") and "_atom_site." in head:
        return "cif"
    if _ATOM_RECORD.search(head):
        return "pdbqt" if _PDBQT_MARK.search(head) else "pdb"
    if "," in head.split("\n", 1)[0] and len(_first_row(head)) > 1:
        return "csv"
    return "smi" if _looks_like_smiles_list(head) else None


def count_ligands(text: str, kind: str) -> int:
    """Ligands in a ligand file of ``kind`` (records, models or SMILES lines), counted without parsing them."""
    if kind == "sdf":
        records = re.findall(r"^\$\$\$\$\s*$", text, re.M)
        tail = text.rsplit("$$$$", 1)[-1] if records else text
        return len(records) + (1 if tail.strip() else 0)
    if kind == "mol2":
        return text.count("@<TRIPOS>MOLECULE")
    if kind == "pdbqt":
        return max(1, len(re.findall(r"^MODEL\b", text, re.M)))
    if kind == "csv":
        return max(0, sum(1 for row in csv.reader(io.StringIO(text)) if any(c.strip() for c in row)) - 1)
    lines = [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return len(lines) - (1 if lines and lines[0][0].lower() == "smiles" else 0)


def read_upload(role: str, data: bytes, client_name: str, budget: UnpackBudget, max_ligands: int) -> UploadedFile:
    """Decode, identify and count one upload for ``role`` (see :data:`ROLE_KINDS`), charged to the request's ``budget``.

    Raises:
        UploadError: 415 when the content is not what the role needs (whatever the file name says),
            422 for an empty ligand file or one over ``max_ligands``, 413 when the request's files unpack too large.
    """
    label = f"{role} upload {client_name!r}" if client_name else f"{role} upload"
    if not data.strip():
        raise UploadError("the file is empty", label)
    text = decode_upload(data, label, budget)
    kind = identify(text)
    if kind == "csv" and role in _CSV_COLUMNS and not any(need <= set(_first_row(text)) for need in _CSV_COLUMNS[role]):
        kind = "csv-other"
    if kind not in ROLE_KINDS[role]:
        found = _KIND_NAMES.get(kind, "not a molecular file geomol reads")
        raise UploadError(f"the content is {found}; expected {_ROLE_NEEDS[role]}", label, status=415)
    ligands = count_ligands(text, kind) if role == "ligands" else 0
    if role == "ligands":
        _check_count(ligands, max_ligands, label)
    return UploadedFile(role, kind, text, ligands)


def smiles_text_upload(text: str, max_ligands: int, budget: UnpackBudget) -> UploadedFile:
    """The ``smiles`` form field (one ``SMILES [name]`` per line) as a ligand upload, charged to ``budget``.

    Raises:
        UploadError: 422 when a line does not start with a SMILES, or for no or too many lines; 413 over the budget.
    """
    label = "smiles field"
    budget.take(len(text.encode("utf-8")), label)
    if not _looks_like_smiles_list(text):
        raise UploadError("expected one 'SMILES [name]' per line", label)
    count = count_ligands(text, "smi")
    _check_count(count, max_ligands, label)
    return UploadedFile("ligands", "smi", text if text.endswith("\n") else text + "\n", count)


def _check_count(count: int, max_ligands: int, label: str) -> None:
    if count == 0:
        raise UploadError("no ligand in the file", label)
    if count > max_ligands:
        raise UploadError(f"{count} ligands; this server takes at most {max_ligands} per job (split the series)",
                          label, limit="max_ligands")
