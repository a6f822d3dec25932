"""The builder shared by the protein–ligand datasets (PDBbind, protein-ligand-benchmark, FEP benchmark).

:func:`build_ligand_complex` runs in preprocessing worker processes. Each worker keeps the
receptors it parsed recently (items are handed out grouped by receptor file), so a target with
90 ligands parses its protein once. Besides the graph it reports the ligand's identity (the
connectivity block of its InChIKey, blind to stereo and protonation) so that one compound seen
in two series or two sources can be kept on one side of a split.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Hashable, Iterable, Sequence

from rdkit import Chem, RDLogger

from geomol.data.blocks import BlockGraph
from geomol.data.complexes.build import complex_from_structure
from geomol.data.datasets.processed import ItemInfo, default_cache_dir, replace_info
from geomol.data.complexes.fragment import FragmentVocab
from geomol.data.io import Structure, read_ligand, read_structure
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.splits.grouped import connected_groups
from geomol.errors import StructureReadError

__all__ = ["build_ligand_complex", "cached_receptor", "ligand_identity", "recipe_inputs", "load_fragment_vocab",
           "assign_groups", "inchikey_from_meta"]


@functools.lru_cache(maxsize=2)
def _receptor(path: str, size: int, mtime_ns: int, keep_hydrogens: bool) -> Structure:
    return read_structure(path, keep_hydrogens=keep_hydrogens)


def cached_receptor(path: str, keep_hydrogens: bool) -> Structure:
    """The receptor read by this worker process recently (the last two files), else read now."""
    stat = os.stat(path)  # size and mtime in the cache key: an edited file is read again
    return _receptor(os.path.realpath(path), stat.st_size, stat.st_mtime_ns, keep_hydrogens)


@functools.lru_cache(maxsize=4)
def load_fragment_vocab(path: str) -> FragmentVocab:
    """A saved vocabulary, memoised per process (workers build many items with one vocabulary)."""
    return FragmentVocab.load(path)


def ligand_identity(mol: Chem.Mol) -> str:
    """First block of the InChIKey (connectivity only), or ``''`` when RDKit cannot make one."""
    RDLogger.DisableLog("rdApp.*")  # InChI warnings (undefined stereo, ...) are not ours to show
    try:
        key = Chem.MolToInchiKey(mol)
    except Exception:  # noqa: BLE001 - an unsanitisable molecule simply has no identity
        key = ""
    finally:
        RDLogger.EnableLog("rdApp.*")
    return key.split("-")[0] if key else ""


def build_ligand_complex(files: dict[str, str], *, ligand: int, pocket_cutoff: float, keep_hydrogens: bool,
                         require_sanitised: bool = False) -> tuple[BlockGraph, dict[str, Any]]:
    """Pocket + ligand graph of one ligand against a receptor.

    Args:
        files: ``receptor`` (PDB/mmCIF), ``ligands`` (SDF/MOL2), optionally ``ligands_fallback``
            (read when ``ligands`` cannot be, e.g. PDBbind's MOL2 beside its SDF) and
            ``fragments`` (a saved :class:`~geomol.data.complexes.fragment.FragmentVocab`).
        ligand: index of the molecule in the ligand file.
        pocket_cutoff: Å, receptor blocks with a heavy atom this close to a ligand heavy atom.
        keep_hydrogens: keep hydrogens in receptor and ligand blocks.
        require_sanitised: a ligand RDKit cannot sanitise raises (the item is skipped and reported)
            instead of being used unsanitised with a warning.

    Returns:
        The graph (y is nan: labels are attached by the dataset) and ``{'inchikey': ...}``.
    """
    try:
        mol = read_ligand(files["ligands"], ligand)
    except StructureReadError:
        if "ligands_fallback" not in files:
            raise
        mol = read_ligand(files["ligands_fallback"], ligand)
    if require_sanitised and mol.HasProp("_geomol_sanitize_error"):
        raise StructureReadError(f"RDKit cannot sanitise the ligand: {mol.GetProp('_geomol_sanitize_error')}",
                                 source=mol.GetProp("_geomol_source"), record=f"molecule {ligand}")
    receptor = cached_receptor(files["receptor"], keep_hydrogens)
    fragments = load_fragment_vocab(files["fragments"]) if "fragments" in files else None
    graph = complex_from_structure(receptor, mol, pocket_cutoff=pocket_cutoff, keep_hydrogens=keep_hydrogens,
                                   fragments=fragments)
    return graph, {"inchikey": ligand_identity(mol)}


def recipe_inputs(recipe: ComplexRecipe | None, cache_dir: str | os.PathLike | None
                  ) -> tuple[dict[str, str], dict[str, Any]]:
    """``(extra files, builder params)`` of :func:`build_ligand_complex` for a recipe (default: the
    default recipe); the fragment vocabulary, if any, is saved in the store folder ``cache_dir``."""
    recipe = recipe or ComplexRecipe()
    return recipe.builder_files(cache_dir or default_cache_dir()), recipe.builder_params()


def assign_groups(infos: Sequence[ItemInfo], keys: Iterable[Iterable[Hashable]]) -> list[ItemInfo]:
    """Set ``group`` of every item: items sharing any key (transitively) share one group.

    Besides the given keys, items of one protein with the same ligand identity (``extra['inchikey']``)
    are tied, so one compound in two series or sources is one group. The group id is the id of
    the group's first item.
    """
    keys = [list(k) for k in keys]
    for info, item_keys in zip(infos, keys):
        if info.extra.get("inchikey"):
            item_keys.append(("compound", info.protein, info.extra["inchikey"]))
    numbers = connected_groups(keys)
    first: dict[int, str] = {}
    for info, number in zip(infos, numbers):
        first.setdefault(number, info.id)
    return [replace_info(info, group=first[number]) for info, number in zip(infos, numbers)]


def inchikey_from_meta(info: ItemInfo, meta: dict) -> ItemInfo:
    """``info_from_meta`` hook: keep the ligand identity the builder reported."""
    return replace_info(info, extra={"inchikey": meta.get("inchikey", "")}) if meta.get("inchikey") else info

