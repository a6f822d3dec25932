"""What a user passes as ``ligands``, expanded into one :class:`LigandInput` per ligand to predict.

Accepted, alone or in a list:

* an SDF or MOL2 file (plain, .gz, .bz2): every molecule in it, in file order; a record RDKit
  cannot read becomes an input carrying its error (named by its title, else ``#<index>``);
* a PDBQT file of docking poses (Vina, smina, gnina): every pose, with bond orders from the file's
  ``REMARK SMILES`` (meeko) or from a SMILES template (``smiles=``; :mod:`geomol.data.io.pdbqt`);
* a PDB/mmCIF file holding only the ligand;
* an RDKit ``Mol`` with 3D coordinates;
* a residue name inside the receptor file (``"UNK"``, or explicitly ``"resname:UNK"``): HETATM or
  ATOM records alike, as DNA–ligand files write them;
* a chain group of the receptor file, ``"chain:B"`` / ``"chains:H,L"``: a protein (or nucleic
  acid) partner, for protein–protein affinities;
* a :class:`LigandInput` already expanded (e.g. by :func:`select_ligand`), kept as it is.

Expansion never raises for a bad ligand: the error travels with the input so that the others
are still predicted. Every input's source names its file and molecule by title
(``'ligands.sdf [molecule 3 'lig_7']'``); names repeated across the inputs are made unique
(:mod:`geomol.inference.names`). A SMILES list (``.smi``, ``.csv``) is refused here with the remedy: SMILES
have no pose, they are posed on a reference ligand first (:mod:`geomol.inference.smiles_inputs`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Sequence

from rdkit import Chem

from geomol.data.chemistry.checks import ERROR, Finding
from geomol.data.io import detect_format, ligand_names, read_ligand, read_ligands
from geomol.data.io._source import rdkit_messages
from geomol.data.io.pdbqt import is_pdbqt, read_pdbqt_poses
from geomol.data.io.smiles import is_smiles_list, read_smiles_file
from geomol.data.blocks import BlockGraph
from geomol.errors import ConfigError, GeomolError
from geomol.inference.names import duplicate_finding, unique_names, warn_duplicates

__all__ = ["LigandInput", "ligand_inputs", "graph_inputs", "select_ligand", "is_in_receptor_spec", "with_unique_names",
           "mark_renamed", "smiles_list_problem", "SMILES_REMEDY"]

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
        extra: additional result columns for this ligand (the pose report of a ligand posed from SMILES,
            the docking score of a PDBQT pose).
        findings: what is known about the input before its complex is built: the error with its code
            (``'unreadable'``, ``'no_common_core'``, ...), warnings such as a renamed duplicate name.
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
    findings: list[Finding] = field(default_factory=list)

    @property
    def in_receptor_file(self) -> bool:
        """True when the ligand is part of the receptor file (a residue or a chain group)."""
        return self.resname is not None or self.chains is not None


def is_in_receptor_spec(text: str) -> bool:
    """True for ``'UNK'``, ``'resname:UNK'``, ``'chain:B'`` ... (strings naming part of the receptor file)."""
    return bool(_CHAINS.match(text) or _RESIDUE.match(text))


def _failed(name: str, source: str, error: str, code: str = "unreadable") -> LigandInput:
    return LigandInput(name, source, error=error, findings=[Finding(ERROR, code, error)])


def _record_source(path: Path, index: int, title: str) -> str:
    return f"{path} [molecule {index} {title!r}]" if title else f"{path} [molecule {index}]"


def _molecule_input(mol: Chem.Mol, index: int, source: str) -> LigandInput:
    title = mol.GetProp("_Name").strip() if mol.HasProp("_Name") else ""
    return LigandInput(title or f"#{index}", source, molecule=mol)


def _record_input(path: Path, index: int, title: str) -> LigandInput:
    """Re-read one record that failed in bulk, to report its own reason."""
    name, source = title or f"#{index}", _record_source(path, index, title)
    try:
        return LigandInput(name, source, molecule=read_ligand(path, index))
    except GeomolError as exc:
        return _failed(name, source, str(exc))


def _molecule_file_inputs(path: Path) -> list[LigandInput]:
    """Every record of an SDF/MOL2 file; unreadable records carry their error."""
    try:
        titles = ligand_names(path)
    except GeomolError as exc:
        return [_failed(path.name, str(path), str(exc))]
    try:
        readable = read_ligands(path, skip_invalid=True)
    except GeomolError:  # not one readable record: each is re-read below for its own reason
        readable = []
    by_index = {mol.GetIntProp("_geomol_record"): mol for mol in readable}
    return [LigandInput(title or f"#{i}", _record_source(path, i, title), molecule=by_index[i]) if i in by_index
            else _record_input(path, i, title) for i, title in enumerate(titles)]


def _pdbqt_inputs(path: Path, templates: "_Templates") -> list[LigandInput]:
    """Every pose of a PDBQT file (bond orders from its REMARK SMILES or the template named like it)."""
    try:
        poses = read_pdbqt_poses(path, templates.smiles_for(path))
    except GeomolError as exc:
        return [_failed(path.name, str(path), str(exc))]
    inputs = []
    for mol in poses:
        name = mol.GetProp("_Name")
        score = {"docking_score": mol.GetDoubleProp("docking_score")} if mol.HasProp("docking_score") else {}
        inputs.append(LigandInput(name, _record_source(path, mol.GetIntProp("_geomol_record"), name), molecule=mol,
                                  extra=score))
    return inputs


def _file_inputs(path: Path, templates: "_Templates") -> list[LigandInput]:
    if is_pdbqt(path):
        return _pdbqt_inputs(path, templates)
    try:
        fmt = detect_format(path)
    except GeomolError as exc:
        return [_failed(path.name, str(path), str(exc))]
    if fmt in ("pdb", "cif"):
        return [LigandInput(path.name, str(path), ligand_file=path)]
    return _molecule_file_inputs(path)


def _looks_like_smiles(text: str) -> bool:
    with rdkit_messages():  # captured, not printed: a file name is no SMILES
        mol = Chem.MolFromSmiles(text)
    return mol is not None and mol.GetNumAtoms() > 1


def _string_inputs(text: str, templates: "_Templates") -> list[LigandInput]:
    chains = _CHAINS.match(text)
    if chains:
        ids = tuple(c for c in re.split(r"[,\s]+", chains.group(1)) if c)
        return [LigandInput(f"chains {','.join(ids)}", text, chains=ids)]
    path = Path(text)
    if path.exists():
        return _file_inputs(path, templates)
    residue = _RESIDUE.match(text)
    if residue:
        return [LigandInput(residue.group(1), text, resname=residue.group(1))]
    if _looks_like_smiles(text):
        return [_failed(text, text, f"{text}: a SMILES string has no 3D pose; give a reference ligand in its "
                        f"binding pose to pose it on ({SMILES_REMEDY})", code="smiles_without_reference")]
    return [_failed(path.name or text, text, f"{text}: ligand file not found (nor a residue name such as 'UNK' or a "
                    "chain group such as 'chain:B')")]


SMILES_REMEDY = "--reference REF.sdf on the command line, reference= in Python"


def smiles_list_problem(path: str | PathLike) -> str | None:
    """Why a SMILES list cannot be given as posed ligands (None for any other file)."""
    if not is_smiles_list(path):
        return None
    return (f"{os.fspath(path)} is a list of SMILES, which have no 3D pose: add a reference ligand in its binding "
            f"pose, on which each SMILES is posed by its common core ({SMILES_REMEDY}; docs/predict.md)")


def _expand(item: Any, index: int, templates: "_Templates") -> list[LigandInput]:
    if isinstance(item, LigandInput):
        return [item]
    if isinstance(item, Chem.Mol):
        return [_molecule_input(item, index, f"molecule {index}")]
    if isinstance(item, (str, PathLike)):
        problem = smiles_list_problem(item)
        if problem:
            raise ConfigError(problem)
        return _string_inputs(os.fspath(item), templates)
    raise ConfigError(f"unsupported ligand input of type {type(item).__name__} (expected a file path, an RDKit Mol, "
                      "a residue name or 'chain:<id>')")


class _Templates:
    """SMILES templates of PDBQT ligands: one SMILES for all, or a SMILES list matched by ligand name."""

    def __init__(self, smiles: Any):
        self.source = smiles
        if smiles is None or isinstance(smiles, Chem.Mol) or (isinstance(smiles, str) and not is_smiles_list(smiles)):
            self.by_name = None
        elif isinstance(smiles, (str, PathLike)):
            self.by_name = {entry.name: entry.smiles for entry in read_smiles_file(smiles)}
        else:
            self.by_name = dict(smiles)

    def smiles_for(self, path: Path) -> Any:
        """The template of the PDBQT ``path`` (None: none given, read the file's own)."""
        if self.by_name is None:
            return self.source
        if len(self.by_name) == 1:
            return next(iter(self.by_name.values()))
        stem = path.name[:path.name.lower().rindex(".pdbqt")] if ".pdbqt" in path.name.lower() else path.stem
        for name in (stem, stem.removesuffix("_out")):
            if name in self.by_name:
                return self.by_name[name]
        raise ConfigError(f"no SMILES named {stem!r} in the templates ({len(self.by_name)} names, e.g. "
                          f"{', '.join(list(self.by_name)[:3])})", source=path)


def mark_renamed(inputs: list[LigandInput], names: list[str], unique: list[str], renamed: dict[int, str]) -> None:
    """Give the inputs at ``renamed``'s indices their unique name and a ``duplicate_name`` warning, and issue one
    warning for the run (``names`` as given, ``unique`` as made by :func:`~geomol.inference.names.unique_names`)."""
    for index, original in renamed.items():
        item = inputs[index]
        item.name = unique[index]
        item.findings.append(duplicate_finding(original, item.name, names.count(original), item.source))
    warn_duplicates(names, unique, renamed)


def with_unique_names(inputs: list[LigandInput]) -> list[LigandInput]:
    """``inputs`` with repeated names made unique in place (:mod:`geomol.inference.names`): the renamed carry a
    ``duplicate_name`` warning, and one warning is issued for the run."""
    names = [item.name for item in inputs]
    mark_renamed(inputs, names, *unique_names(names))
    return inputs


def ligand_inputs(ligands: Any, *, smiles: Any = None) -> list[LigandInput]:
    """Expand a ``ligands`` argument (one item or a list of them, see the module notes), in order, names unique.

    Args:
        smiles: bond orders of PDBQT poses: a SMILES string (or RDKit Mol) for every PDBQT file, or a
            ``.smi``/``.csv`` file or ``{name: SMILES}`` matched by the PDBQT's name (its file name without
            ``.pdbqt``, and without a trailing ``_out``); None: from the files' REMARK SMILES lines.

    Raises:
        ConfigError: no ligands, an item of an unsupported type (a programming error, not bad data), a
            SMILES list (which needs a reference ligand), or a template list without a ligand's name.
    """
    if ligands is None:
        raise ConfigError("no ligands given: pass ligand files, RDKit molecules, a residue name or 'chain:<id>'")
    items = list(ligands) if isinstance(ligands, (list, tuple)) else [ligands]
    if not items:
        raise ConfigError("the list of ligands is empty")
    templates = _Templates(smiles)
    inputs: list[LigandInput] = []
    for i, item in enumerate(items):
        inputs.extend(_expand(item, i, templates))
    return with_unique_names(inputs)


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
        return _failed(name or str(which), source, str(exc))
    index = int(mol.GetIntProp("_geomol_record"))
    title = mol.GetProp("_Name").strip() if mol.HasProp("_Name") else ""
    item = _molecule_input(mol, index, _record_source(Path(path), index, title))
    item.name = name or item.name
    return item
