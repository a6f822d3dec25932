"""The protein–protein affinity folder (``../shared/data/protein_affinity``): reader, difficulty classes, dataset.

Layout (the folder's README): ``labels.csv`` with one row per complex (``id, chains_a, chains_b,
dG_kcal_mol, pK, category, label_quality, spread_log10K, cluster, source_datasets, note, ...``) and
``<id>/complex.pdb.gz`` holding the two partners. :func:`read_protein_affinity` gives one
:class:`ProteinComplex` per row; :class:`ProteinAffinityDataset` builds their interface graphs
(segment 0: the residues of partner A within the interface cutoff of partner B; segment 1: those of B
near A) into the processed store, once.

Labels: the graphs carry ``y`` = the pK equivalent of the measured ΔG at 298.15 K (−ΔG / (R T ln 10),
:func:`geomol.units.pk_from_dg`), so that a prediction converts back to exactly the ΔG it was trained on;
the folder's own ``pK`` column (from Kd, medians taken separately, other temperatures) differs from it by up
to about one unit for a few complexes (its README). Splits: by the sequence ``cluster`` column, never by
complex (:func:`cluster_folds`).
"""
from __future__ import annotations

import csv
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.datasets.ppa import build_chain_complex
from geomol.data.datasets.processed import ItemInfo, ProcessedDataset
from geomol.data.splits.corpus import leave_cluster_out_folds
from geomol.data.splits.grouped import check_no_leakage
from geomol.data.store.cache import Recipe
from geomol.errors import ConfigError, DatasetError
from geomol.units import pk_from_dg

__all__ = ["INTERFACE_CUTOFF", "CATEGORIES", "DIFFICULTY_CLASSES", "ProteinComplex", "ppab_difficulty",
           "read_protein_affinity", "cluster_folds", "ProteinAffinityDataset"]

INTERFACE_CUTOFF = 6.0
"""Å: GET's protein–protein recipe (the official PDBbind-PP and PPAB preprocessing): a residue is in the
interface when one of its heavy atoms is this close to a heavy atom of the other partner."""
CATEGORIES = ("enzyme-inhibitor", "antibody-antigen", "TCR-pMHC", "other")
DIFFICULTY_CLASSES = ((0.5, "rigid"), (1.5, "medium"), (math.inf, "flexible"))
"""PPAB difficulty by the interface RMSD (Å) between bound and unbound partners, as GET's PPAB evaluation
splits it: rigid below 0.5 Å, medium below 1.5 Å, flexible from 1.5 Å on."""
SOURCE = "protein_affinity"
_REQUIRED = ("id", "chains_a", "chains_b", "dG_kcal_mol", "category", "cluster")
_I_RMSD = re.compile(r"I-RMSD\s+([0-9.]+)\s*A")


def ppab_difficulty(interface_rmsd: float | None) -> str:
    """``'rigid'``, ``'medium'`` or ``'flexible'`` for a PPAB interface RMSD in Å; ``''`` without one."""
    if interface_rmsd is None or not math.isfinite(interface_rmsd):
        return ""
    return next(name for bound, name in DIFFICULTY_CLASSES if interface_rmsd < bound)


@dataclass(frozen=True)
class ProteinComplex:
    """One labelled complex of the folder.

    Attributes:
        id: the folder name (PDB id, with ``_<chains_a>_<chains_b>`` where one entry has two partner definitions).
        structure: path of ``<id>/complex.pdb.gz``.
        chains_a, chains_b: chain ids of the two partners (antibody / TCR first where there is one).
        dg_kcal_mol: measured binding free energy, kcal/mol (negative).
        category: one of :data:`CATEGORIES`.
        cluster: sequence cluster (``PPC…``): the unit of every split.
        label_quality: ``'single measurement'`` or ``'median of n (spread …)'``.
        spread_log10k: spread of the measurements the label is the median of (log10 units; 0 for one value).
        interface_rmsd: PPAB's bound/unbound interface RMSD in Å, for complexes labelled from PPAB (else None).
        sources: the source data sets, the label's first.
    """

    id: str
    structure: Path
    chains_a: tuple[str, ...]
    chains_b: tuple[str, ...]
    dg_kcal_mol: float
    category: str
    cluster: str
    label_quality: str = "single measurement"
    spread_log10k: float = 0.0
    interface_rmsd: float | None = None
    sources: tuple[str, ...] = ()

    @property
    def pk(self) -> float:
        """The pK equivalent of ``dg_kcal_mol`` at 298.15 K (the training label)."""
        return pk_from_dg(self.dg_kcal_mol)

    @property
    def difficulty(self) -> str:
        """PPAB difficulty class (:func:`ppab_difficulty`), ``''`` for complexes not labelled from PPAB."""
        return ppab_difficulty(self.interface_rmsd)

    @property
    def partners(self) -> str:
        """``'A,B:C'``: the chain groups as the prediction command takes them."""
        return f"{','.join(self.chains_a)}:{','.join(self.chains_b)}"


def _complex(row: dict[str, str], root: Path, where: str) -> ProteinComplex:
    try:
        dg = float(row["dG_kcal_mol"])
        spread = float(row.get("spread_log10K") or 0.0)
    except ValueError as exc:
        raise DatasetError(f"not a number: {exc}", where) from None
    if not math.isfinite(dg) or dg >= 0:
        raise DatasetError(f"dG_kcal_mol must be a negative binding free energy, got {dg}", where)
    if row["category"] not in CATEGORIES:
        raise DatasetError(f"unknown category {row['category']!r} (expected one of {', '.join(CATEGORIES)})", where)
    sources = tuple(s for s in row.get("source_datasets", "").split(";") if s)
    found = _I_RMSD.search(row.get("note", ""))
    from_ppab = bool(sources) and sources[0].startswith("PPAB")  # the label, and so its I-RMSD, comes from PPAB
    chains_a, chains_b = tuple(row["chains_a"]), tuple(row["chains_b"])
    if not chains_a or not chains_b or set(chains_a) & set(chains_b):
        raise DatasetError(f"partners {row['chains_a']!r} and {row['chains_b']!r} must be two disjoint, non-empty "
                           "chain groups", where)
    return ProteinComplex(row["id"], root / row["id"] / "complex.pdb.gz", chains_a, chains_b, dg, row["category"],
                          row["cluster"], row.get("label_quality", ""), spread,
                          float(found.group(1)) if found and from_ppab else None, sources)


def read_protein_affinity(root: str | os.PathLike, ids: Sequence[str] | None = None) -> list[ProteinComplex]:
    """The complexes of the folder, in ``labels.csv`` order (only ``ids``, in the table's order, when given).

    Raises:
        DatasetError: no ``labels.csv``, a missing column, a malformed row, a duplicated id, a missing
            structure file, or an unknown id in ``ids`` — naming the file and the row.
    """
    root = Path(root)
    table = root / "labels.csv"
    try:
        with open(table, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise DatasetError(f"cannot read the labels: {exc.strerror}", table) from None
    missing = [c for c in _REQUIRED if rows and c not in rows[0]]
    if missing or not rows:
        raise DatasetError(f"labels.csv lacks the column(s) {missing}" if rows else "labels.csv has no rows", table)
    wanted = None if ids is None else set(ids)
    complexes, seen = [], set()
    for number, row in enumerate(rows, start=2):
        where = f"{table}:{number}"
        if row["id"] in seen:
            raise DatasetError(f"id {row['id']!r} is listed twice", where)
        seen.add(row["id"])
        if wanted is not None and row["id"] not in wanted:
            continue
        item = _complex(row, root, where)
        if not item.structure.is_file():
            raise DatasetError(f"structure file {item.structure.name} of {item.id} not found", item.structure)
        complexes.append(item)
    unknown = sorted((wanted or set()) - seen)
    if unknown:
        raise DatasetError(f"ids not in labels.csv: {unknown[:5]}{' …' if len(unknown) > 5 else ''}", table)
    return complexes


def cluster_folds(clusters: Sequence[str], n_folds: int = 5, *, valid_fraction: float = 0.1, seed: int = 0
                  ) -> list[dict[str, list[int]]]:
    """Leave-cluster-out folds: per fold ``{'train', 'valid', 'test'}`` item indices, ``valid`` a slice of the
    training clusters for model selection; the folds' test parts partition the items, and no cluster is in
    two parts of any fold (checked).

    Raises:
        DatasetError: a split leaks a cluster (never, unless the splitting itself is broken).
        ConfigError: more folds than clusters.
    """
    folds = leave_cluster_out_folds(clusters, n_folds, valid_fraction=valid_fraction, seed=seed)
    for fold in folds:
        check_no_leakage(fold, clusters, num_items=len(clusters))
    check_no_leakage({f"fold{k}": fold["test"] for k, fold in enumerate(folds)}, clusters, num_items=len(clusters))
    return folds


def _item(complex_: ProteinComplex, recipe: ComplexRecipe) -> tuple[Recipe, ItemInfo]:
    params = {"receptor_chains": list(complex_.chains_a), "ligand_chains": list(complex_.chains_b),
              "interface_cutoff": recipe.pocket_cutoff, "keep_hydrogens": recipe.keep_hydrogens}
    info = ItemInfo(id=complex_.id, source=SOURCE, protein=complex_.cluster, series=complex_.category,
                    ligand="".join(complex_.chains_b), group=complex_.id, y=complex_.pk,
                    extra={"category": complex_.category, "cluster": complex_.cluster,
                           "difficulty": complex_.difficulty, "dG_kcal_mol": complex_.dg_kcal_mol,
                           "partners": complex_.partners, "label_quality": complex_.label_quality,
                           "spread_log10K": complex_.spread_log10k})
    return Recipe(complex_.id, build_chain_complex, {"structure": str(complex_.structure)}, params,
                  group=str(complex_.structure)), info


class ProteinAffinityDataset(ProcessedDataset):
    """Interface graphs of the folder's complexes, labelled with the pK equivalent of their ΔG.

    Item metadata: ``protein`` = the sequence cluster (so a grouped split is a leave-cluster-out split),
    ``series`` = the category; ``extra`` holds ``category``, ``cluster``, ``difficulty``, ``dG_kcal_mol``,
    ``partners``, ``label_quality`` and ``spread_log10K`` (``dataset.column('category')``).

    Args:
        root: the folder (``../shared/data/protein_affinity``).
        recipe: how graphs are built; default :data:`INTERFACE_CUTOFF` Å interfaces without hydrogens.
            Ligand fragments do not apply to protein partners.
        ids: only these complexes.
        **kwargs: :class:`~geomol.data.datasets.processed.ProcessedDataset` options (cache_dir, num_workers, ...).
    """

    def __init__(self, root: str | os.PathLike, *, recipe: ComplexRecipe | None = None,
                 ids: Sequence[str] | None = None, **kwargs):
        recipe = recipe or ComplexRecipe(pocket_cutoff=INTERFACE_CUTOFF)
        if recipe.fragments is not None:
            raise ConfigError("ligand fragments do not apply to protein–protein complexes: use a recipe without them")
        self.complexes = read_protein_affinity(root, ids)
        self.recipe = recipe
        kwargs.setdefault("name", f"{SOURCE}-{recipe.pocket_cutoff:g}A")
        super().__init__([_item(c, recipe) for c in self.complexes], **kwargs)
