"""LightningDataModules of the affinity datasets (GET): PLB / FEP benchmark, PDBbind, ATOM3D LBA
and LEP, protein–protein affinity.

All share :class:`AffinityDataModule`: the graph recipe (:class:`~geomol.data.complexes.recipe.ComplexRecipe`:
pocket cutoff, hydrogens, fragment vocabulary), which is handed to the model and stored in its checkpoints; the
processed-data store, filled once in ``prepare_data`` by parallel workers; and dynamic batching
by a budget of blocks (reference: 2000 per batch and device).

Splits: datasets that come pre-split (ATOM3D, PDBbind split files) keep theirs; the others are
split by protein (grouped k-fold or named held-out proteins) or randomly by ligand group, and
every split is checked for leakage (no protein or ligand group on two sides, where relevant).
"""
from __future__ import annotations

import math
import os
import random
from functools import cached_property
from typing import Any, Literal, Sequence

from geomol.units import pk_from_dg
from geomol.data.datasets.processed import ProcessedDataset
from geomol.data.store.preprocess import PreprocessReport
from geomol.data.datasets.atom3d_lmdb import LEP_CUTOFF
from geomol.data.complexes.pocket import DEFAULT_CUTOFF
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.batching.sampler import DynamicBatchSampler
from geomol.data.splits.grouped import group_kfold, random_group_split
from geomol.errors import ConfigError
from geomol.tasks.data_base import GraphDataModule

__all__ = ["AffinityDataModule", "BenchmarkAffinityDataModule", "PDBbindDataModule", "LBADataModule",
           "LEPDataModule", "PPADataModule", "split_by_protein"]

SplitMethod = Literal["protein_kfold", "held_out", "random", "all"]


def split_by_protein(dataset: ProcessedDataset, method: SplitMethod = "protein_kfold", *, n_folds: int = 5,
                     fold: int = 0, test_proteins: Sequence[str] | None = None,
                     valid_proteins: Sequence[str] | None = None, valid_fraction: float = 0.1,
                     test_fraction: float = 0.1, seed: int = 0) -> dict[str, list[int]]:
    """Item indices of train / valid / test.

    * ``protein_kfold``: proteins in ``n_folds`` groups; fold ``fold`` is the test set.
    * ``held_out``: ``test_proteins`` (and ``valid_proteins``, if given) by name.
    * ``random``: ligand groups at random (``valid_fraction``, ``test_fraction``); the same
      protein appears on all sides, so this measures interpolation, not generalisation.
    * ``all``: every item for training, nothing held out (final models trained for a fixed number
      of epochs; run the Trainer with ``limit_val_batches=0``).

    Unless given, the validation proteins are a random ``valid_fraction`` of the remaining proteins
    (at least one), so model selection also happens on proteins the model has not seen.
    """
    proteins, groups = dataset.column("protein"), dataset.column("group")
    if method == "all":
        return {"train": list(range(len(proteins))), "valid": [], "test": []}
    if method == "random":
        return random_group_split(groups, (1 - valid_fraction - test_fraction, valid_fraction, test_fraction),
                                  seed=seed)
    known = sorted(set(proteins))
    if method == "protein_kfold":
        folds = group_kfold(proteins, n_folds, seed=seed)
        if not 0 <= fold < len(folds):
            raise ConfigError(f"fold {fold} out of range for {len(folds)} folds")
        test_set = {proteins[i] for i in folds[fold][1]}
    elif method == "held_out":
        test_set = set(test_proteins or ())
        unknown = sorted((test_set | set(valid_proteins or ())) - set(known))
        if not test_set or unknown:
            raise ConfigError(f"held_out needs test_proteins among {known}; unknown: {unknown}")
    else:
        raise ConfigError(f"unknown split method {method!r} (protein_kfold | held_out | random | all)")
    if valid_proteins:
        valid_set = set(valid_proteins)
    else:
        rest = [p for p in known if p not in test_set]
        count = max(1, round(valid_fraction * len(rest))) if len(rest) > 1 else 0
        valid_set = set(random.Random(seed).sample(rest, count))
    parts: dict[str, list[int]] = {"train": [], "valid": [], "test": []}
    for i, protein in enumerate(proteins):
        parts["test" if protein in test_set else "valid" if protein in valid_set else "train"].append(i)
    return parts


class AffinityDataModule(GraphDataModule):
    """Common part of the affinity data modules.

    Args:
        pocket_cutoff, keep_hydrogens, fragments: the graph recipe
            (:class:`~geomol.data.complexes.recipe.ComplexRecipe`;
            ``fragments`` is the path of a saved :class:`~geomol.data.complexes.fragment.FragmentVocab`, ``None``
            one block per ligand atom as the reference).
        max_blocks: block budget per batch.
        group_batches: training batches hold the ligands of one protein only (``True`` or ``'protein'``)
            or of one series only (``'series'``: one assay of one protein), for ranking losses.
        cache_dir: processed-data store (default ``$GEOMOL_CACHE`` or ``~/.cache/geomol``).
        preprocess_workers: processes used by ``prepare_data`` (default: all CPUs).
        num_workers, seed: see :class:`~geomol.tasks.data_base.GraphDataModule`.
    """

    def __init__(self, pocket_cutoff: float = DEFAULT_CUTOFF, keep_hydrogens: bool = False, fragments: str | None = None,
                 max_blocks: int = 2000, group_batches: bool | Literal["protein", "series"] = False, cache_dir: str | None = None,
                 preprocess_workers: int | None = None, num_workers: int = 0, seed: int = 12):
        super().__init__(num_workers=num_workers, seed=seed)
        if group_batches not in (False, True, "protein", "series"):
            raise ConfigError(f"group_batches must be true, false, 'protein' or 'series', got {group_batches!r}")
        self.pocket_cutoff, self.keep_hydrogens, self.fragments_path = pocket_cutoff, keep_hydrogens, fragments
        self.max_blocks, self.group_batches, self.cache_dir = max_blocks, group_batches, cache_dir
        self.preprocess_workers = preprocess_workers
        self.dataset: ProcessedDataset | None = None
        self.preprocess_reports: list[PreprocessReport] = []  # what prepare_data built, for `geomol preprocess`

    # ------------------------------------------------------------------ graphs
    @cached_property
    def recipe(self) -> ComplexRecipe:
        """How this data module builds its graphs; the task stores it with the model."""
        return ComplexRecipe.from_options(self.pocket_cutoff, self.keep_hydrogens, self.fragments_path)

    @property
    def graph_recipe(self) -> ComplexRecipe:
        return self.recipe

    @property
    def num_block_types(self) -> int:
        return self.recipe.num_block_types

    def _dataset_kwargs(self) -> dict[str, Any]:
        return {"cache_dir": self.cache_dir}

    def make_dataset(self, num_workers: int) -> ProcessedDataset:
        raise NotImplementedError

    @property
    def _workers(self) -> int:
        return (os.cpu_count() or 1) if self.preprocess_workers is None else self.preprocess_workers

    def prepare_data(self) -> None:
        self.preprocess_reports = [self.make_dataset(num_workers=self._workers).report]

    def load_dataset(self) -> ProcessedDataset:
        if self.dataset is None:
            self.dataset = self.make_dataset(num_workers=0)
        return self.dataset

    def relative_edges(self) -> dict[str, list[tuple[str, str, float]]]:
        """Measured relative affinities of the dataset's perturbation graphs (FEP benchmark series):
        per series, ``(ligand_a, ligand_b, ΔpK)`` with ΔpK = pK(b) − pK(a) from the edge's ΔΔG at
        298.15 K. Empty for data without such edges."""
        edges: dict[str, list[tuple[str, str, float]]] = {}
        for edge in getattr(self.load_dataset(), "fep_edges", []):
            if math.isfinite(edge.ddg):
                edges.setdefault(edge.series, []).append((edge.ligand_a, edge.ligand_b, pk_from_dg(edge.ddg)))
        return edges

    def batch_sampler(self, dataset, train: bool, num_replicas: int, rank: int) -> DynamicBatchSampler:
        key = "protein" if self.group_batches is True else self.group_batches
        groups = dataset.column(key) if train and key else None
        return DynamicBatchSampler(dataset.sizes, self.max_blocks, groups=groups, shuffle=train, seed=self.seed,
                                   num_replicas=num_replicas, rank=rank, pad=train)


class BenchmarkAffinityDataModule(AffinityDataModule):
    """The protein-ligand-benchmark layout and/or the public FEP+ benchmark layout, split by protein.

    Args:
        plb_root: folder of PLB targets (e.g. ``../shared/data/plb``), or ``None``.
        fep_root: folder of the FEP benchmark (e.g. ``../shared/data/fep_benchmark``), or ``None``.
        targets: PLB targets to use (default all); series: FEP series (``'group/scheme'``, default all).
        split, n_folds, fold, test_proteins, valid_proteins, valid_fraction, test_fraction: see
            :func:`split_by_protein`. Proteins shared by the two sources count as one protein.
        Other arguments: see :class:`AffinityDataModule`.
    """

    def __init__(self, plb_root: str | None = None, fep_root: str | None = None,
                 targets: list[str] | None = None, series: list[str] | None = None,
                 split: SplitMethod = "protein_kfold", n_folds: int = 5, fold: int = 0,
                 test_proteins: list[str] | None = None, valid_proteins: list[str] | None = None,
                 valid_fraction: float = 0.1, test_fraction: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        if plb_root is None and fep_root is None:
            raise ConfigError("give plb_root, fep_root or both")
        self.plb_root, self.fep_root, self.targets, self.series = plb_root, fep_root, targets, series
        self.split_args = dict(method=split, n_folds=n_folds, fold=fold, test_proteins=test_proteins,
                               valid_proteins=valid_proteins, valid_fraction=valid_fraction,
                               test_fraction=test_fraction)

    def make_dataset(self, num_workers: int) -> ProcessedDataset:
        from geomol.data.datasets.sources import BenchmarkSource

        return BenchmarkSource(self.recipe, plb_root=self.plb_root, fep_root=self.fep_root, targets=self.targets,
                               series=self.series, **self._dataset_kwargs()).make_dataset(num_workers)

    def build_splits(self) -> dict[str, ProcessedDataset]:
        dataset = self.load_dataset()
        parts = split_by_protein(dataset, seed=self.seed, **self.split_args)
        by = ("group",) if self.split_args["method"] == "random" else ("protein", "group")
        return dataset.split(parts, by=by)


class PLBDataModule(BenchmarkAffinityDataModule):
    """The protein-ligand-benchmark alone (``configs/get_plb.yaml``): a copy of its ``data/`` folder.

    Args:
        root: the folder of PLB targets (required; ``configs/get_plb.yaml`` gives ``../shared/data/plb``, relative
            to the repository root); ``--data.root`` on the command line.
        targets: targets to use (default all). Other arguments: see :class:`BenchmarkAffinityDataModule`
            (split by target: ``protein_kfold``, ``held_out`` leave-one-target-out, or ``random``).
    """

    def __init__(self, root: str, targets: list[str] | None = None, **kwargs):
        super().__init__(plb_root=root, fep_root=None, targets=targets, **kwargs)


class PDBbindDataModule(AffinityDataModule):
    """PDBbind in its standard layout with an ``INDEX_*`` file and id lists per split.

    Args:
        roots: folder(s) holding ``<id>/<id>_protein.pdb``, ``_pocket.pdb``, ``_ligand.sdf|mol2``.
        index_file: the affinity index (``INDEX_general_PL_data.2020`` style).
        train_ids, valid_ids, test_ids: files with one PDB id per line (identity30/60, scaffold, ...).
        receptor: ``"pocket"`` (the provided pocket file) or ``"protein"`` (pocket selected by cutoff).
        qualifiers: ``"keep"`` / ``"drop"`` / ``"drop_inequalities"`` for ``<``, ``>``, ``~`` labels.
    """

    def __init__(self, roots: list[str], index_file: str, train_ids: str, valid_ids: str, test_ids: str,
                 receptor: Literal["pocket", "protein"] = "pocket", qualifiers: str = "keep", **kwargs):
        super().__init__(**kwargs)
        self.roots, self.index_file, self.receptor, self.qualifiers = roots, index_file, receptor, qualifiers
        self.id_files = {"train": train_ids, "valid": valid_ids, "test": test_ids}

    def _make(self, stage: str, num_workers: int) -> ProcessedDataset:
        from geomol.data.datasets.pdbbind import PDBbindDataset

        return PDBbindDataset(self.roots, self.index_file, ids=self.id_files[stage], receptor=self.receptor,
                              qualifiers=self.qualifiers, recipe=self.recipe, num_workers=num_workers,
                              name=f"pdbbind-{stage}", **self._dataset_kwargs())

    def prepare_data(self) -> None:
        self.preprocess_reports = [self._make(stage, self._workers).report for stage in self.id_files]

    def build_splits(self) -> dict[str, ProcessedDataset]:
        splits = {stage: self._make(stage, 0) for stage in self.id_files}
        overlap = {s for s in splits for t in splits if s < t
                   and set(splits[s].column("id")) & set(splits[t].column("id"))}
        if overlap:
            raise ConfigError(f"PDBbind id lists overlap between splits {sorted(overlap)}")
        return splits


class _Atom3DDataModule(AffinityDataModule):
    """ATOM3D LMDB splits given as three paths (``split-by-sequence-identity-30/data/{train,val,test}``)."""

    dataset_name = "lba"

    def __init__(self, train: str, valid: str, test: str, **kwargs):
        super().__init__(**kwargs)
        self.paths = {"train": train, "valid": valid, "test": test}

    def _options(self) -> dict[str, Any]:
        return {}

    def _make(self, stage: str, num_workers: int) -> ProcessedDataset:
        from geomol.data.datasets.affinity import affinity_dataset

        return affinity_dataset(self.dataset_name, self.paths[stage], num_workers=num_workers,
                                **self._options(), **self._dataset_kwargs())

    def prepare_data(self) -> None:
        self.preprocess_reports = [self._make(stage, self._workers).report for stage in self.paths]

    def build_splits(self) -> dict[str, ProcessedDataset]:
        return {stage: self._make(stage, 0) for stage in self.paths}


class LBADataModule(_Atom3DDataModule):
    """ATOM3D LBA (ligand binding affinity) LMDB splits; pocket and ligand atoms as stored."""

    dataset_name = "lba"

    def _options(self) -> dict[str, Any]:
        return {"ligand_hydrogens": self.recipe.keep_hydrogens, "fragments": self.recipe.fragments}


class LEPDataModule(_Atom3DDataModule):
    """ATOM3D LEP (ligand efficacy prediction) LMDB splits; items are (inactive, active) pairs.

    ``pocket_cutoff`` is the interface distance (official LEP: 6 Å).
    """

    dataset_name = "lep"

    def __init__(self, train: str, valid: str, test: str, pocket_cutoff: float = LEP_CUTOFF, **kwargs):
        super().__init__(train, valid, test, pocket_cutoff=pocket_cutoff, **kwargs)

    def _options(self) -> dict[str, Any]:
        return {"cutoff": self.recipe.pocket_cutoff, "ligand_hydrogens": self.recipe.keep_hydrogens}


class PPADataModule(AffinityDataModule):
    """Protein–protein affinity: a CSV of ids, chain groups and affinities plus the structures.

    Args:
        table: CSV (``id, receptor_chains, ligand_chains[, pdb], pK | dG | Kd ...``).
        structure_dir: folder of the structures (default: the table's folder).
        split, n_folds, fold, ...: see :func:`split_by_protein` (proteins = the ``protein``/``group``
            column when the table has one, else each complex is its own group).
    """

    def __init__(self, table: str, structure_dir: str | None = None, split: SplitMethod = "random",
                 n_folds: int = 5, fold: int = 0, test_proteins: list[str] | None = None,
                 valid_fraction: float = 0.1, test_fraction: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.table, self.structure_dir = table, structure_dir
        self.split_args = dict(method=split, n_folds=n_folds, fold=fold, test_proteins=test_proteins,
                               valid_fraction=valid_fraction, test_fraction=test_fraction)

    def make_dataset(self, num_workers: int) -> ProcessedDataset:
        from geomol.data.datasets.ppa import PPADataset

        return PPADataset(self.table, structure_dir=self.structure_dir, interface_cutoff=self.recipe.pocket_cutoff,
                          keep_hydrogens=self.recipe.keep_hydrogens, num_workers=num_workers, **self._dataset_kwargs())

    def build_splits(self) -> dict[str, ProcessedDataset]:
        dataset = self.load_dataset()
        parts = split_by_protein(dataset, seed=self.seed, **self.split_args)
        return dataset.split(parts, by=("group",))
