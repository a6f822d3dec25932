"""Ligands given as SMILES with a reference ligand: posed (:mod:`geomol.data.posing.poses`) into prediction inputs.

Accepted as ``ligands`` (alone or in a list): a ``.smi``/``.csv`` file (see
:func:`~geomol.data.io.smiles.read_smiles_file`), a SMILES string, a ``(name, smiles)`` pair, or a
:class:`~geomol.data.io.smiles.SmilesEntry` (name, SMILES and where it came from, kept as it is).
The reference is an SDF/MOL2 file (its first molecule) or an RDKit molecule with 3D coordinates;
the receptor's heavy atoms (restricted to ``receptor_chains``) are what clashes are scored against.

A ligand that cannot be posed becomes an input carrying its error (and its code, e.g.
``'no_common_core'``), so the others are still predicted; a pose whose core had to move off the reference
carries a ``core_relaxed`` warning; the pose report
(:data:`~geomol.data.posing.poses.POSE_COLUMNS`) travels with each input as extra result columns.
Repeated names are made unique before posing (:mod:`geomol.inference.names`), so that the poses written
and the results carry the same unique names.
"""
from __future__ import annotations

import os
from os import PathLike
from pathlib import Path
from typing import Any, Callable, Sequence

from rdkit import Chem

from geomol.data.chemistry.checks import ERROR, WARNING, Finding
from geomol.data.io import Structure, read_ligand, read_structure
from geomol.data.io.smiles import SMILES_SUFFIXES, SmilesEntry, read_smiles_file
from geomol.data.posing.poses import PosedLigand, PoseParameters, PoseTemplate
from geomol.errors import ConfigError
from geomol.inference.findings import error_code
from geomol.inference.ligand_inputs import LigandInput, mark_renamed
from geomol.inference.names import unique_names

__all__ = ["smiles_entries", "posed_inputs"]


def _is_smiles_file(text: str) -> bool:
    path = Path(text)
    suffixes = [s.lower() for s in path.suffixes if s.lower() not in (".gz", ".bz2")]
    return bool(suffixes) and suffixes[-1] in SMILES_SUFFIXES and (path.exists() or "/" in text or os.sep in text)


def _expand(item: Any, index: int, columns: dict[str, str | None]) -> list[SmilesEntry]:
    if isinstance(item, SmilesEntry):
        return [item]
    if isinstance(item, PathLike) or (isinstance(item, str) and _is_smiles_file(item)):
        return read_smiles_file(item, **columns)
    if isinstance(item, str):
        return [SmilesEntry(f"#{index}", item, f"ligand {index}")]
    if isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
        return [SmilesEntry(item[0], item[1], f"ligand {index} {item[0]!r}")]
    raise ConfigError(f"with a reference ligand, ligands are SMILES strings, (name, smiles) pairs or .smi/.csv "
                      f"files, not {type(item).__name__}")


def smiles_entries(ligands: Any, *, smiles_column: str | None = None,
                   name_column: str | None = None) -> list[SmilesEntry]:
    """Expand a ``ligands`` argument of SMILES (see the module notes) into named entries, in order.

    ``smiles_column`` / ``name_column`` name the columns of CSV files (default: found by their common names,
    :data:`~geomol.data.io.smiles.SMILES_COLUMNS`).

    Raises:
        ConfigError: no ligands, or an item of an unsupported type.
        StructureReadError: a SMILES file cannot be read.
    """
    if ligands is None:
        raise ConfigError("no ligands given: pass SMILES strings, (name, smiles) pairs or a .smi/.csv file")
    one_pair = isinstance(ligands, tuple) and len(ligands) == 2 and all(isinstance(x, str) for x in ligands)
    items = [ligands] if isinstance(ligands, (str, PathLike)) or one_pair else list(ligands)
    if not items:
        raise ConfigError("the list of ligands is empty")
    columns = {"smiles_column": smiles_column, "name_column": name_column}
    return [entry for i, item in enumerate(items) for entry in _expand(item, i, columns)]


def _reference_molecule(reference: str | PathLike | Chem.Mol) -> Chem.Mol:
    if isinstance(reference, Chem.Mol):
        return reference
    if isinstance(reference, (str, PathLike)):
        return read_ligand(reference, 0)
    raise ConfigError(f"the reference ligand must be an SDF/MOL2 file or an RDKit Mol, not {type(reference).__name__}")


def _receptor_heavy_atoms(receptor: str | PathLike | Structure, chains: Sequence[str] | None) -> Structure:
    structure = receptor if isinstance(receptor, Structure) else read_structure(receptor)
    if chains:
        structure = structure.select_chains(chains)
    return structure


def _posed_input(posed: PosedLigand) -> LigandInput:
    findings = [Finding(ERROR, error_code(posed.error_kind or "PoseError"), posed.error)] if posed.error else []
    if posed.core_relaxation is not None:  # the pose is not held exactly on the reference: the chemist should know
        findings.append(Finding(WARNING, "core_relaxed", posed.core_relaxation.message()))
    if posed.small_core:  # another series matched on a ring or two: the score rests on a guessed pose
        findings.append(Finding(WARNING, "small_core", posed.small_core))
    return LigandInput(posed.name, posed.source, molecule=posed.molecule, error=posed.error, extra=posed.report(),
                       findings=findings)


def posed_inputs(receptor: str | PathLike | Structure, ligands: Any, reference: str | PathLike | Chem.Mol, *,
                 receptor_chains: Sequence[str] | None = None, parameters: PoseParameters | None = None,
                 smiles_column: str | None = None, name_column: str | None = None,
                 progress: Callable[[int], None] | None = None) -> tuple[list[LigandInput], list[PosedLigand]]:
    """Pose every SMILES on the reference in the receptor; the prediction inputs and the pose reports.

    ``smiles_column`` / ``name_column``: the columns of CSV files (see :func:`smiles_entries`).
    ``progress``: called with the ligands posed so far after each one.

    Raises:
        GeomolError subclasses: the receptor, the reference or a SMILES file cannot be read (a bad
            SMILES does not raise: its input carries the error).
    """
    entries = smiles_entries(ligands, smiles_column=smiles_column, name_column=name_column)
    names = [entry.name for entry in entries]
    unique, renamed = unique_names(names)
    entries = [entry._replace(name=name) for entry, name in zip(entries, unique)]
    template = PoseTemplate(_reference_molecule(reference), _receptor_heavy_atoms(receptor, receptor_chains),
                            parameters)
    posed = template.pose_all(entries, progress)
    inputs = [_posed_input(p) for p in posed]
    mark_renamed(inputs, names, unique, renamed)
    return inputs, posed
