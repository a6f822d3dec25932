"""What a user passes as ``ligands``, expanded into one :class:`LigandInput` per ligand to predict.

Accepted, alone or in a list:

* an SDF or MOL2 file (plain, .gz, .bz2): every molecule in it, in file order; a record RDKit
  cannot read becomes an input carrying its error (named by its title, else ``#<index>``);
* a PDB/mmCIF file holding only the ligand;
* an RDKit ``Mol`` with 3D coordinates;
* a residue name inside the receptor file (``"UNK"``, or explicitly ``"resname:UNK"``): HETATM or
  ATOM records alike, as DNA–ligand files write them;
* a chain group of the receptor file, ``"chain:B"`` / ``"chains:H,L"``: a protein (or nucleic
  acid) partner, for protein–protein affinities;
* a :class:`LigandInput` already expanded (e.g. by :func:`select_ligand`), kept as it is.

Expansion never raises for a bad ligand: the error travels with the input so that the others
are still predicted.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Sequence

from rdkit import Chem

from geomol.data.io import detect_format, ligand_names, read_ligand, read_ligands
from geomol.data.blocks import BlockGraph
from geomol.errors import ConfigError, GeomolError

__all__ = ["LigandInput", "ligand_inputs", "graph_inputs", "select_ligand", "is_in_receptor_spec"]

_RESIDUE = re.compile(r"^(?:resname:)?([A-Za-z0-9]{1,5})$")
_CHAINS = re.compile(r"^chains?:\s*([A-Za-z0-9][A-Za-z0-9,\s]*)$")


@dataclass
class LigandInput:
    """One ligand to predict (exactly one of the ligand fields set), or why it cannot be.

    Attributes:
        name: the name reported with the prediction (molecule title, else ``#<index>``).
        source: where it came from (``'file [molecule i]'``), for messages.
        molecule: an RDKit molecule with coordinates.
        ligand_file: a PDB/mmCIF file holding only the ligand.
        resname: a residue name inside the receptor file.
        chains: a chain group of the receptor file (protein–protein).
        graph: a ready-made complex (the receptor argument was a BlockGraph).
        error: why this input cannot be predicted ('' if it can).
        extra: additional result columns for this ligand (the pose report of a ligand posed from SMILES).
    """

    name: str
    source: str
    molecule: Chem.Mol | None = None
    ligand_file: Path | None = None
    resname: str | None = None
    chains: tuple[str, ...] | None = None
    graph: BlockGraph | None = None
    error: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def in_receptor_file(self) -> bool:
        """True when the ligand is part of the receptor file (a residue or a chain group)."""
        return self.resname is not None or self.chains is not None


def is_in_receptor_spec(text: str) -> bool:
    """True for ``'UNK'``, ``'resname:UNK'``, ``'chain:B'`` ... (strings naming part of the receptor file)."""
    return bool(_CHAINS.match(text) or _RESIDUE.match(text))


def _molecule_input(mol: Chem.Mol, index: int, source: str) -> LigandInput:
    title = mol.GetProp("_Name").strip() if mol.HasProp("_Name") else ""
    return LigandInput(title or f"#{index}", source, molecule=mol)


def _record_input(path: Path, index: int, title: str) -> LigandInput:
    """Re-read one record that failed in bulk, to report its own reason."""
    name, source = title or f"#{index}", f"{path} [molecule {index}]"
    try:
        return LigandInput(name, source, molecule=read_ligand(path, index))
    except GeomolError as exc:
        return LigandInput(name, source, error=str(exc))


def _molecule_file_inputs(path: Path) -> list[LigandInput]:
    """Every record of an SDF/MOL2 file; unreadable records carry their error."""
    try:
        titles = ligand_names(path)
    except GeomolError as exc:
        return [LigandInput(path.name, str(path), error=str(exc))]
    try:
        readable = read_ligands(path, skip_invalid=True)
    except GeomolError:  # not one readable record: each is re-read below for its own reason
        readable = []
    by_index = {mol.GetIntProp("_geomol_record"): mol for mol in readable}
    return [LigandInput(title or f"#{i}", f"{path} [molecule {i}]", molecule=by_index[i]) if i in by_index
            else _record_input(path, i, title) for i, title in enumerate(titles)]


def _file_inputs(path: Path) -> list[LigandInput]:
    try:
        fmt = detect_format(path)
    except GeomolError as exc:
        return [LigandInput(path.name, str(path), error=str(exc))]
    if fmt in ("pdb", "cif"):
        return [LigandInput(path.name, str(path), ligand_file=path)]
    return _molecule_file_inputs(path)


def _string_inputs(text: str) -> list[LigandInput]:
    chains = _CHAINS.match(text)
    if chains:
        ids = tuple(c for c in re.split(r"[,\s]+", chains.group(1)) if c)
        return [LigandInput(f"chains {','.join(ids)}", text, chains=ids)]
    path = Path(text)
    if path.exists():
        return _file_inputs(path)
    residue = _RESIDUE.match(text)
    if residue:
        return [LigandInput(residue.group(1), text, resname=residue.group(1))]
    return [LigandInput(path.name or text, text, error=f"{text}: ligand file not found (nor a residue name such as "
                                                        "'UNK' or a chain group such as 'chain:B')")]


def _expand(item: Any, index: int) -> list[LigandInput]:
    if isinstance(item, LigandInput):
        return [item]
    if isinstance(item, Chem.Mol):
        return [_molecule_input(item, index, f"molecule {index}")]
    if isinstance(item, (str, PathLike)):
        return _string_inputs(os.fspath(item))
    raise ConfigError(f"unsupported ligand input of type {type(item).__name__} (expected a file path, an RDKit Mol, "
                      "a residue name or 'chain:<id>')")


def ligand_inputs(ligands: Any) -> list[LigandInput]:
    """Expand a ``ligands`` argument (one item or a list of them, see the module notes), in order.

    Raises:
        ConfigError: no ligands, or an item of an unsupported type (a programming error, not bad data).
    """
    if ligands is None:
        raise ConfigError("no ligands given: pass ligand files, RDKit molecules, a residue name or 'chain:<id>'")
    items = list(ligands) if isinstance(ligands, (list, tuple)) else [ligands]
    if not items:
        raise ConfigError("the list of ligands is empty")
    inputs: list[LigandInput] = []
    for i, item in enumerate(items):
        inputs.extend(_expand(item, i))
    return inputs


def graph_inputs(graphs: BlockGraph | Sequence[BlockGraph]) -> list[LigandInput]:
    """Ready-made complexes (BlockGraphs), predicted as they are."""
    graphs = [graphs] if isinstance(graphs, BlockGraph) else list(graphs)
    return [LigandInput(str(getattr(g, "name", "") or f"#{i}"), "BlockGraph", graph=g) for i, g in enumerate(graphs)]


def select_ligand(path: str | PathLike, which: int | str, name: str | None = None) -> LigandInput:
    """One molecule of an SDF/MOL2 file by index or title (e.g. one row of a pairs table)."""
    source = f"{path} [molecule {which!r}]"
    try:
        mol = read_ligand(path, which)
    except GeomolError as exc:
        return LigandInput(name or str(which), source, error=str(exc))
    item = _molecule_input(mol, int(mol.GetIntProp("_geomol_record")), source)
    item.name = name or item.name
    return item
