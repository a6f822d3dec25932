"""Nucleic-acid–ligand complexes with measured affinities (``../shared/data/nucleic_affinity``) as a dataset.

Layout of the folder (its README.md says how it was made)::

    labels.csv              one row per complex: pdb_id, na_type (RNA | DNA), affinity_type, value, unit,
                            pK, tier (A | B), ligand_resname, ligand_heavy_atoms, receptor_nucleotides,
                            cluster, source_repo, source_path, note
    <PDBID>/receptor.pdb    the nucleic acid (heavy atoms; metal ions within 6 Å of the ligand kept)
    <PDBID>/ligand.sdf      one posed ligand, bond orders from the wwPDB chemical component dictionary

Tier A labels are Kd/Ki/IC50 (PDBbind NL2020), tier B a ΔG of lower confidence (RNALig). ``cluster`` groups
complexes whose receptors are similar in sequence or family: splits move whole clusters
(:mod:`geomol.data.splits.nucleic`), never single complexes.

Items are built like every protein–ligand item (:func:`~geomol.data.datasets.ligand_complex.build_ligand_complex`:
the receptor blocks — nucleotides, and one block per atom of ions and unmodelled residues — within the pocket
cutoff of the ligand, then the ligand); metadata ``source='nucleic_affinity'``, ``protein`` and ``series`` =
the cluster, ``ligand`` = the ligand's residue name, ``group`` = the cluster, and in ``extra`` the tier,
the nucleic-acid type, the measurement and the ligand's heavy-atom count.
"""
from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.datasets.ligand_complex import build_ligand_complex, recipe_inputs
from geomol.data.datasets.processed import ItemInfo, ProcessedDataset
from geomol.data.store.cache import Recipe
from geomol.errors import ConfigError, DatasetError

__all__ = ["NucleicComplex", "TIERS", "read_nucleic_labels", "nucleic_recipes", "NucleicAffinityDataset"]

TIERS = ("A", "B")
_REQUIRED = ("pdb_id", "na_type", "affinity_type", "pK", "tier", "ligand_resname", "ligand_heavy_atoms", "cluster")
_NA_TYPES = ("RNA", "DNA")


@dataclass(frozen=True)
class NucleicComplex:
    """One row of ``labels.csv`` with the paths of its two files.

    Attributes:
        pdb_id: the folder name; na_type: ``'RNA'`` or ``'DNA'``; affinity_type: Kd, Ki, IC50 or dG;
        pk: −log10(K / M) (tier B: −ΔG / (RT ln 10) at 298.15 K); tier: ``'A'`` or ``'B'``;
        ligand: the ligand's chemical-component code; heavy_atoms: the ligand's heavy atoms;
        cluster: the sequence/family cluster; receptor, ligand_file: the two files.
    """

    pdb_id: str
    na_type: str
    affinity_type: str
    pk: float
    tier: str
    ligand: str
    heavy_atoms: int
    cluster: str
    receptor: Path
    ligand_file: Path

    @property
    def id(self) -> str:
        return f"nucleic_affinity/{self.pdb_id}"


def _row(row: dict[str, str], root: Path, line: int, check_files: bool) -> NucleicComplex:
    source = f"{root / 'labels.csv'} [line {line}]"
    try:
        pk, heavy = float(row["pK"]), int(row["ligand_heavy_atoms"])
    except ValueError as exc:
        raise DatasetError(f"unreadable number ({exc})", source) from None
    if not math.isfinite(pk):
        raise DatasetError(f"pK {row['pK']!r} is not a finite number", source)
    tier, na_type, pdb_id, cluster = row["tier"].strip(), row["na_type"].strip(), row["pdb_id"].strip(), row["cluster"].strip()
    if tier not in TIERS or na_type not in _NA_TYPES or not pdb_id or not cluster:
        raise DatasetError(f"tier must be one of {TIERS}, na_type one of {_NA_TYPES}, pdb_id and cluster non-empty; "
                           f"got tier {tier!r}, na_type {na_type!r}, pdb_id {pdb_id!r}, cluster {cluster!r}", source)
    folder = root / pdb_id
    complex_ = NucleicComplex(pdb_id, na_type, row["affinity_type"].strip(), pk, tier, row["ligand_resname"].strip(),
                              heavy, cluster, folder / "receptor.pdb", folder / "ligand.sdf")
    if check_files:
        for path in (complex_.receptor, complex_.ligand_file):
            if not path.is_file():
                raise DatasetError(f"file of complex {pdb_id} not found", path)
    return complex_


def read_nucleic_labels(root: str | os.PathLike, *, tiers: Sequence[str] = TIERS, ids: Sequence[str] | None = None,
                        check_files: bool = True) -> list[NucleicComplex]:
    """The complexes of the folder's ``labels.csv`` (of the given tiers; only ``ids`` when given), in file order.

    Raises:
        DatasetError: the folder or table is missing, a column is missing, a value is unreadable, an id repeats
            or (``check_files``) a complex's receptor or ligand file is missing — naming the file and line.
        ConfigError: an unknown tier or id asked for.
    """
    root = Path(root)
    unknown = sorted(set(tiers) - set(TIERS))
    if unknown:
        raise ConfigError(f"unknown tier(s) {unknown}; tiers are {list(TIERS)}")
    table = root / "labels.csv"
    if not table.is_file():
        raise DatasetError("nucleic-acid affinity folder has no labels.csv", root)
    with open(table, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in _REQUIRED if c not in (reader.fieldnames or ())]
        if missing:
            raise DatasetError(f"labels.csv lacks column(s) {missing}", table)
        rows = [_row(row, root, line, check_files) for line, row in enumerate(reader, start=2)]
    seen: set[str] = set()
    for row in rows:
        if row.pdb_id in seen:
            raise DatasetError(f"complex {row.pdb_id} is listed twice", table)
        seen.add(row.pdb_id)
    if ids is not None:
        missing = sorted(set(ids) - seen)
        if missing:
            raise ConfigError(f"complex(es) {missing} are not in {table}")
    return [row for row in rows if row.tier in tiers and (ids is None or row.pdb_id in ids)]


def _info(row: NucleicComplex) -> ItemInfo:
    return ItemInfo(id=row.id, source="nucleic_affinity", protein=row.cluster, series=row.cluster, ligand=row.ligand,
                    group=row.cluster, y=row.pk,
                    extra={"pdb_id": row.pdb_id, "tier": row.tier, "na_type": row.na_type, "cluster": row.cluster,
                           "affinity_type": row.affinity_type, "ligand_heavy_atoms": row.heavy_atoms})


def nucleic_recipes(root: str | os.PathLike, *, tiers: Sequence[str] = TIERS, ids: Sequence[str] | None = None,
                    recipe: ComplexRecipe | None = None,
                    cache_dir: str | os.PathLike | None = None) -> list[tuple[Recipe, ItemInfo]]:
    """``(recipe, info)`` of every complex of the given tiers (and ``ids``) (:class:`NucleicAffinityDataset`)."""
    extra, params = recipe_inputs(recipe, cache_dir)
    return [(Recipe(row.id, build_ligand_complex, {"receptor": str(row.receptor), "ligands": str(row.ligand_file),
                                                   **extra}, {"ligand": 0, **params}, group=str(row.receptor)),
             _info(row)) for row in read_nucleic_labels(root, tiers=tiers, ids=ids)]


class NucleicAffinityDataset(ProcessedDataset):
    """RNA/DNA–ligand complexes of a ``nucleic_affinity`` folder, labelled with pK (module notes).

    Args:
        root: the folder (e.g. ``../shared/data/nucleic_affinity``).
        tiers: label tiers to read (default both; evaluate on ``'A'``); ids: only these complexes (PDB ids).
        recipe: how each complex becomes a graph (default :class:`~geomol.data.complexes.recipe.ComplexRecipe`).
        **kwargs: :class:`ProcessedDataset` options (``cache_dir``, ``num_workers``, ``progress``).

    Splits: :func:`geomol.data.splits.nucleic.nucleic_cluster_folds` on ``dataset.column('cluster')``.
    """

    def __init__(self, root: str | os.PathLike, *, tiers: Sequence[str] = TIERS, ids: Sequence[str] | None = None,
                 recipe: ComplexRecipe | None = None, **kwargs):
        kwargs.setdefault("name", "nucleic_affinity")
        super().__init__(nucleic_recipes(root, tiers=tiers, ids=ids, recipe=recipe, cache_dir=kwargs.get("cache_dir")),
                         **kwargs)
