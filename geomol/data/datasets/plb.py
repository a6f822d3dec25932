"""The protein-ligand-benchmark layout (openforcefield/protein-ligand-benchmark) as a dataset.

Per target folder ``<root>/<target>/``: ``00_data/ligands.yml`` (measurements),
``01_protein/crd/protein.pdb`` (prepared receptor) and ``02_ligands/ligands.sdf`` (docked poses,
SDF titles = keys of ``ligands.yml``). Every measurement type becomes pK
(:func:`~geomol.data.datasets.affinity_labels.plb_measurement_pk`: ``ic50``/``ki`` in uM or nM,
unitless ``pic50``, ``dg`` in kcal/mol or kJ/mol; ``dh``/``tds`` ignored).

A ligand measured but without a pose, or posed but without a measurement, is left out with a
warning that counts it. Cofactors in ``01_protein/crd/cofactor.sdf`` are not part of the receptor.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Sequence

import yaml

from geomol.data.store.cache import Recipe
from geomol.data.datasets.affinity_labels import plb_measurement_pk
from geomol.data.datasets.ligand_complex import (
    assign_groups,
    build_ligand_complex,
    inchikey_from_meta,
    recipe_inputs,
)
from geomol.data.datasets.processed import ItemInfo, ProcessedDataset
from geomol.data.io import ligand_names
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.splits.grouped import canonical_protein_key
from geomol.errors import DatasetError

__all__ = ["plb_targets", "plb_items", "plb_recipes", "PLBDataset"]


def plb_targets(root: str | os.PathLike) -> list[str]:
    """Target folder names under ``root`` that hold a ``00_data/ligands.yml``, sorted."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError("protein-ligand-benchmark folder not found", root)
    return sorted(p.name for p in root.iterdir() if (p / "00_data" / "ligands.yml").is_file())


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise DatasetError(f"cannot read YAML: {exc}", path) from None
    if not isinstance(data, dict):
        raise DatasetError("expected a mapping of ligand name to entry", path)
    return data


def plb_items(root: str | os.PathLike, target: str, files_extra: dict[str, str], params: dict
              ) -> list[tuple[Recipe, ItemInfo]]:
    """Recipes and metadata of one target's ligands that have both a pose and a measurement."""
    folder = Path(root) / target
    table = _read_yaml(folder / "00_data" / "ligands.yml")
    receptor = folder / "01_protein" / "crd" / "protein.pdb"
    ligands = folder / "02_ligands" / "ligands.sdf"
    titles = ligand_names(ligands)
    files = {"receptor": str(receptor), "ligands": str(ligands), **files_extra}
    protein = canonical_protein_key(target)
    items = []
    for index, title in enumerate(titles):
        entry = table.get(title)
        if entry is None:
            continue
        source = f"{folder / '00_data' / 'ligands.yml'} [{title}]"
        label = plb_measurement_pk((entry or {}).get("measurement") or {}, source=source)
        info = ItemInfo(id=f"plb/{target}/{title}", source="plb", protein=protein, series=f"plb/{target}",
                        ligand=title, y=label.pk,
                        extra={"measurement": label.kind, "value": label.value, "unit": label.unit,
                               "smiles": str(entry.get("smiles", ""))})
        items.append((Recipe(info.id, build_ligand_complex, files, {"ligand": index, **params}, group=str(receptor)),
                      info))
    unposed = sorted(set(table) - set(titles))
    unmeasured = sorted(set(titles) - set(table))
    for what, names in (("measured ligand(s) without a pose", unposed), ("posed ligand(s) without a measurement",
                                                                          unmeasured)):
        if names:
            warnings.warn(f"{folder}: {len(names)} {what} left out, e.g. {names[0]}", stacklevel=3)
    return items


class PLBDataset(ProcessedDataset):
    """Protein–ligand complexes of the protein-ligand-benchmark folder, labelled with pK.

    Items: pocket (receptor blocks within ``pocket_cutoff`` Å of the ligand) + ligand, one item
    per posed and measured ligand; metadata ``source='plb'``, ``protein`` = canonical target key,
    ``series='plb/<target>'``, ``ligand`` = SDF title, ``group`` (ligand group, see
    :func:`~geomol.data.datasets.ligand_complex.assign_groups`), ``y`` = pK and in ``extra`` the
    measurement type, value, unit and SMILES.

    Args:
        root: the benchmark folder (e.g. ``../shared/data/plb``).
        targets: target folders to use (default all).
        recipe: how each complex becomes a graph (pocket cutoff, hydrogens, fragments; default
            :class:`~geomol.data.complexes.recipe.ComplexRecipe`).
        **kwargs: :class:`ProcessedDataset` options (``cache_dir``, ``num_workers``, ``progress``).

    Splits: ``leave_one_group_out(ds.column('protein'))`` (leave-one-target-out) or
    ``random_group_split(ds.column('group'))`` from :mod:`geomol.data.splits.grouped`.
    """

    def __init__(self, root: str | os.PathLike, *, targets: Sequence[str] | None = None,
                 recipe: ComplexRecipe | None = None, **kwargs):
        items = plb_recipes(root, targets=targets, recipe=recipe, cache_dir=kwargs.get("cache_dir"))
        kwargs.setdefault("name", "plb")
        super().__init__(items, info_from_meta=inchikey_from_meta, **kwargs)
        self._infos = assign_groups(self._infos, [[("series-ligand", i.series, i.ligand)] for i in self._infos])


def plb_recipes(root, *, targets=None, recipe: ComplexRecipe | None = None, cache_dir=None
                ) -> list[tuple[Recipe, ItemInfo]]:
    """All ``(recipe, info)`` pairs of the benchmark (used by :class:`PLBDataset` and the combined set)."""
    available = plb_targets(root)
    chosen = list(targets) if targets is not None else available
    missing = sorted(set(chosen) - set(available))
    if missing:
        raise DatasetError(f"unknown target(s) {missing}; available: {available}", root)
    extra, params = recipe_inputs(recipe, cache_dir)
    return [item for target in chosen for item in plb_items(root, target, extra, params)]

