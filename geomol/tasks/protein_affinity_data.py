"""The protein–protein affinity folder as a LightningDataModule, split leave-cluster-out.

``configs/get_protein_affinity.yaml`` trains GET on it::

    geomol fit --config configs/get_protein_affinity.yaml                             # fold 0 of 5
    geomol fit --config configs/get_protein_affinity.yaml --data.init_args.fold 3

Folds (:func:`~geomol.data.datasets.protein_affinity.cluster_folds`): whole sequence clusters are held out;
each fold's validation part (model selection) is a slice of its training clusters, so the test clusters
are never used to choose anything. ``split: all`` trains on every complex (no validation, no test).
"""
from __future__ import annotations

from typing import Literal, Sequence

from geomol.data.datasets.processed import ProcessedDataset
from geomol.data.datasets.protein_affinity import INTERFACE_CUTOFF, ProteinAffinityDataset, cluster_folds
from geomol.errors import ConfigError
from geomol.tasks.affinity_data import AffinityDataModule

__all__ = ["ProteinAffinityDataModule"]


class ProteinAffinityDataModule(AffinityDataModule):
    """Interface graphs of ``../shared/data/protein_affinity`` (:mod:`geomol.data.datasets.protein_affinity`).

    Args:
        root: the folder (``labels.csv`` and ``<id>/complex.pdb.gz``).
        split: ``cluster_kfold`` (fold ``fold`` of ``n_folds`` leave-cluster-out folds is the test set) or
            ``all`` (every complex trains).
        n_folds, fold, split_seed: the folds (``split_seed`` 0: those of ``benchmarks/protein_affinity_cv.py``).
        valid_fraction: share of each fold's training items, in whole clusters, held out for model selection.
        ids: only these complexes (a quick slice).
        pocket_cutoff: the interface distance in Å (default 6, GET's protein–protein recipe).
        Other arguments: see :class:`~geomol.tasks.affinity_data.AffinityDataModule`.
    """

    def __init__(self, root: str, split: Literal["cluster_kfold", "all"] = "cluster_kfold", n_folds: int = 5,
                 fold: int = 0, split_seed: int = 0, valid_fraction: float = 0.1, ids: Sequence[str] | None = None,
                 pocket_cutoff: float = INTERFACE_CUTOFF, **kwargs):
        super().__init__(pocket_cutoff=pocket_cutoff, **kwargs)
        if split not in ("cluster_kfold", "all"):
            raise ConfigError(f"split must be 'cluster_kfold' or 'all', got {split!r}")
        if split == "cluster_kfold" and not 0 <= fold < n_folds:
            raise ConfigError(f"fold {fold} out of range for {n_folds} folds")
        self.root, self.split, self.ids = root, split, list(ids) if ids else None
        self.n_folds, self.fold, self.split_seed, self.valid_fraction = n_folds, fold, split_seed, valid_fraction

    def make_dataset(self, num_workers: int) -> ProcessedDataset:
        return ProteinAffinityDataset(self.root, recipe=self.recipe, ids=self.ids, num_workers=num_workers,
                                      **self._dataset_kwargs())

    def build_splits(self) -> dict[str, ProcessedDataset]:
        dataset = self.load_dataset()
        if self.split == "all":
            return dataset.split({"train": list(range(len(dataset))), "valid": [], "test": []}, by=("protein",))
        folds = cluster_folds(dataset.column("protein"), self.n_folds, valid_fraction=self.valid_fraction,
                              seed=self.split_seed)
        return dataset.split(folds[self.fold], by=("protein",))
