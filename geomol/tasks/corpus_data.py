"""The affinity corpus (plb, fep_benchmark, uni_fep, ddg_bindingdb) as a LightningDataModule.

:class:`CorpusDataModule` reads the corpus records (:func:`~geomol.data.datasets.corpus.read_corpus`),
clusters their receptors across sources (:func:`~geomol.data.splits.protein_clusters.load_protein_clusters`,
cached), builds every complex once into the processed store
(:class:`~geomol.data.datasets.corpus_dataset.CorpusDataset`: SMILES posed on their series'
reference, docked and expert poses read) and splits by protein
cluster. Every split is checked (:func:`~geomol.data.splits.corpus.check_corpus_split`: no cluster and
no ligand–protein pair in two parts) and its counts per source, series and clusters printed.
"""
from __future__ import annotations

from functools import cached_property
from typing import Any, Literal

from geomol.data.splits.corpus import (check_corpus_split, corpus_split, format_split_summary, item_clusters,
                                     leave_cluster_out_folds)
from geomol.data.datasets.corpus_dataset import CorpusDataset
from geomol.data.datasets.corpus_items import Corpus
from geomol.data.datasets.processed import ProcessedDataset
from geomol.data.datasets.sources import CorpusSource
from geomol.data.splits.protein_clusters import ProteinClusters
from geomol.errors import ConfigError
from geomol.tasks.affinity_data import AffinityDataModule

__all__ = ["CorpusDataModule"]

CorpusSplit = Literal["cluster_kfold", "cluster_random"]


class CorpusDataModule(AffinityDataModule):
    """All four affinity sources, split by cross-source protein cluster.

    Args:
        root: the folder holding ``plb``, ``fep_benchmark``, ``uni_fep`` and ``ddg_bindingdb``
            (default :func:`~geomol.data.paths.shared_data_dir`).
        sources: the sources to use (default all four).
        series: only these series, as ``'<source>/<name>'`` (e.g. ``'uni_fep/ChEMBL__PTPN1__CHEMBL768521'``).
        max_series_per_source: else, at most this many series of each source (a slice for smoke runs).
        split: ``cluster_kfold``: leave-cluster-out fold ``fold`` of ``n_folds`` is the test set and
            ``valid`` a ``valid_fraction`` slice of the training clusters
            (:func:`~geomol.data.splits.corpus.leave_cluster_out_folds`); ``cluster_random``: one split of
            whole clusters sized by item fractions ``valid_fraction`` and ``test_fraction``.
        split_seed: seeds the split. The folds are drawn over every corpus record of the chosen series,
            before items that cannot be built are skipped, so with the default (0, the seed of
            ``benchmarks/affinity_corpus_cv.py``) fold ``k`` here is fold ``k`` of the cross-validation
            protocol (``docs/evaluation.md``), whatever the store skipped.
        pose_parameters: :class:`~geomol.data.posing.poses.PoseParameters` fields for posing SMILES
            (default: its defaults, without refinement in the pocket unless ``refinement`` is given —
            ``{}`` for its defaults — so that the store's existing items keep their cache keys).
        Other arguments: see :class:`~geomol.tasks.affinity_data.AffinityDataModule`.
    """

    def __init__(self, root: str | None = None, sources: list[str] | None = None, series: list[str] | None = None,
                 max_series_per_source: int | None = None, split: CorpusSplit = "cluster_kfold", n_folds: int = 5,
                 fold: int = 0, valid_fraction: float = 0.1, test_fraction: float = 0.1, split_seed: int = 0,
                 pose_parameters: dict[str, Any] | None = None, **kwargs):
        super().__init__(**kwargs)
        if split not in ("cluster_kfold", "cluster_random"):
            raise ConfigError(f"unknown split {split!r} (cluster_kfold | cluster_random)")
        self.source_options = dict(root=root, sources=sources, series=series,
                                   max_series_per_source=max_series_per_source, pose_parameters=pose_parameters)
        self.split_args = dict(method=split, n_folds=n_folds, fold=fold, valid_fraction=valid_fraction,
                               test_fraction=test_fraction, seed=split_seed)

    # ------------------------------------------------------------------ records
    @cached_property
    def source(self) -> CorpusSource:
        """The corpus as the data layer reads it (records, clusters, complexes): what this module splits."""
        return CorpusSource(self.recipe, cache_dir=self.cache_dir, **self.source_options)

    @property
    def is_slice(self) -> bool:
        return self.source.is_slice

    @property
    def corpus(self) -> Corpus:
        """The corpus records of the chosen sources and series (read once per data module)."""
        return self.source.corpus

    @property
    def clusters(self) -> ProteinClusters:
        """Protein clusters of the corpus' receptors (cached as JSON beside the processed store)."""
        return self.source.clusters

    def make_dataset(self, num_workers: int) -> CorpusDataset:
        return self.source.make_dataset(num_workers)

    # ------------------------------------------------------------------ splits
    def split_indices(self, dataset: CorpusDataset) -> dict[str, list[int]]:
        """``train`` / ``valid`` / ``test`` item indices of ``dataset``, whole clusters at a time.

        The parts are drawn over all corpus records and carried to ``dataset`` through the clusters,
        so skipped items do not move a cluster to another part.
        """
        record_clusters = item_clusters(self.corpus.items, self.clusters)
        args = self.split_args
        if args["method"] == "cluster_random":
            fractions = (1 - args["valid_fraction"] - args["test_fraction"], args["valid_fraction"],
                         args["test_fraction"])
            parts = corpus_split(record_clusters, fractions, seed=args["seed"])
        else:
            folds = leave_cluster_out_folds(record_clusters, args["n_folds"], valid_fraction=args["valid_fraction"],
                                            seed=args["seed"])
            if not 0 <= args["fold"] < len(folds):
                raise ConfigError(f"fold {args['fold']} out of range for {len(folds)} folds")
            parts = folds[args["fold"]]
        part_of = {record_clusters[i]: part for part, indices in parts.items() for i in indices}
        labels = dataset.column("protein")
        return {part: [i for i, label in enumerate(labels) if part_of[label] == part] for part in parts}

    def build_splits(self) -> dict[str, ProcessedDataset]:
        dataset = self.load_dataset()
        parts = self.split_indices(dataset)
        labels = dataset.column("protein")
        check_corpus_split(parts, dataset.corpus_items, labels)
        skipped = len(dataset.skipped)
        print(f"corpus split ({self.split_args['method']}, checked: no protein cluster or ligand-protein pair in two "
              f"parts; {skipped} item(s) skipped, see {dataset.store.root / 'reports' / dataset.name}.skipped.csv)")
        print(format_split_summary(parts, dataset.corpus_items, labels))
        return dataset.split(parts, by=("protein", "group"))
