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
from os import PathLike
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


# ---------------------------------------------------------------------- records
def _sdf_records(text: str) -> list[str]:
    """Molfile records of an SD file (split at ``$$$$`` lines; a final record may lack one)."""
    pieces = ("\n" + text).split("\n$$$$")  # str.split: much faster than a multi-line regex
    records = [pieces[0][1:]]
    for piece in pieces[1:]:
        rest_of_line, _, after = piece.partition("\n")
        if rest_of_line.strip():  # '$$$$' followed by text on its line: not a record end
            records[-1] += "\n$$$$" + piece
        else:
            records.append(after)
    records = [r + "\n" for r in records]
    return records[:-1] if not records[-1].strip() else records


def _mol2_records(text: str) -> list[str]:
    """Records of a MOL2 file, each starting at its ``@<TRIPOS>MOLECULE`` line."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(_MOL2_HEADER)]
    return ["".join(lines[a:b]) for a, b in zip(starts, starts[1:] + [len(lines)])]


def _title(fmt: str, record: str) -> str:
    lines = record.splitlines()
    index = 1 if fmt == "mol2" else 0  # MOL2: the line after @<TRIPOS>MOLECULE
    return lines[index].strip() if len(lines) > index else ""


def _sd_properties(record: str) -> dict[str, str]:
    """SDF data items after ``M  END``: ``> <NAME>`` header lines, values up to a blank line."""
    lines = record.splitlines()
    end = next((i for i, line in enumerate(lines) if line.startswith("M  END")), len(lines))
    props: dict[str, str] = {}
    name, values = None, []
    for line in lines[end + 1:] + [""]:
        if name is None:
            if line.startswith(">") and "<" in line and ">" in line[line.index("<"):]:
                name = line[line.index("<") + 1:line.index(">", line.index("<"))]
                values = []
        elif line.strip():
            values.append(line)
        else:
            props[name] = "\n".join(values)
            name = None
    return props


def _records(path) -> tuple[str, list[str]]:
    text = read_text(path)
    fmt = detect_format(path, text)
    if fmt not in ("sdf", "mol2"):
        raise StructureReadError(f"expected an SDF or MOL2 file, got {fmt.upper()}", source=path)
    records = _sdf_records(text) if fmt == "sdf" else _mol2_records(text)
    if not records:
        raise StructureReadError(f"no molecule records in {fmt.upper()} file", source=path)
    return fmt, records


# ---------------------------------------------------------------------- parsing
def _parse_record(fmt: str, record: str, path, index: int, sanitize: bool) -> Chem.Mol:
    where = f"molecule {index} {_title(fmt, record)!r}"
    typing = mol2_atom_type_problem(record) if fmt == "mol2" else None
    if typing:
        raise StructureReadError(typing, source=path, record=where)
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
    if sanitize:
        mol = _sanitized_or_raw(mol, path, where)
    mol.SetProp("_geomol_source", str(path))
    mol.SetIntProp("_geomol_record", index)
    return mol


def _sanitized_or_raw(mol: Chem.Mol, path, where: str) -> Chem.Mol:
    """The sanitised molecule, or the raw one (coordinates and elements intact) with a warning."""
    candidate = Chem.Mol(mol)
    with rdkit_messages() as messages:
        failed = Chem.SanitizeMol(candidate, catchErrors=True)
    if failed == Chem.SanitizeFlags.SANITIZE_NONE:
        return candidate
    reason = sanitisation_hint(rdkit_reason(messages, str(failed)))
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
    fmt, records = _records(path)
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
    return _parse_record(fmt, records[index], path, index, sanitize)


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
