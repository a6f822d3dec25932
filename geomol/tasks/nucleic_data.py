"""The LightningDataModule of the nucleic-acid affinity set (RNA/DNA receptors; ``configs/get_nucleic_affinity.yaml``).

Complexes of a ``nucleic_affinity`` folder (:class:`~geomol.data.datasets.nucleic_affinity.NucleicAffinityDataset`)
in the leave-cluster-out folds of :func:`~geomol.data.splits.nucleic.nucleic_cluster_folds` (whole sequence
clusters, never single complexes, on each side): fold ``fold`` is the test set (its tier-A complexes), a share of
the other clusters the validation set (tier A), the rest the training set, its tier-B complexes kept or dropped
(``tier_b``). The same folds as the cross-validation table (``benchmarks/nucleic_affinity_cv.py``) for the same
``n_folds``, ``split_seed`` and ``valid_fraction``.
"""
from __future__ import annotations

from typing import Literal

from geomol.data.datasets.processed import ProcessedDataset
from geomol.data.splits.grouped import check_no_leakage
from geomol.data.splits.nucleic import nucleic_cluster_folds
from geomol.errors import ConfigError
from geomol.tasks.affinity_data import AffinityDataModule

__all__ = ["NucleicAffinityDataModule"]


class NucleicAffinityDataModule(AffinityDataModule):
    """RNA/DNA–ligand complexes with measured pK, split by sequence cluster.

    Args:
        root: the ``nucleic_affinity`` folder (``${GEOMOL_SHARED_DATA}/nucleic_affinity`` in the configs).
        ids: only these complexes (PDB ids; default all), e.g. a small selection for a smoke run.
        tier_b: ``'include'`` the low-confidence tier-B labels in training, or ``'exclude'`` them (validation and
            test hold tier A only either way).
        n_folds, fold: the leave-cluster-out folds and the one tested; ``split: all`` trains on every complex
            (nothing held out: a final model trained for a fixed number of epochs, ``limit_val_batches=0``).
        split_seed, valid_fraction: the folds' draw and each fold's inner validation share.
        Other arguments: see :class:`~geomol.tasks.affinity_data.AffinityDataModule`.
    """

    def __init__(self, root: str, ids: list[str] | None = None, tier_b: Literal["include", "exclude"] = "exclude",
                 split: Literal["cluster_kfold", "all"] = "cluster_kfold", n_folds: int = 5, fold: int = 0,
                 split_seed: int = 0, valid_fraction: float = 0.2, **kwargs):
        super().__init__(**kwargs)
        if tier_b not in ("include", "exclude") or split not in ("cluster_kfold", "all"):
            raise ConfigError(f"tier_b is 'include' or 'exclude' and split 'cluster_kfold' or 'all'; got {tier_b!r}, "
                              f"{split!r}")
        if split == "cluster_kfold" and not 0 <= fold < n_folds:
            raise ConfigError(f"fold {fold} out of range for {n_folds} folds")
        self.root, self.ids, self.tier_b, self.split = root, ids, tier_b, split
        self.split_args = {"n_folds": n_folds, "fold": fold, "seed": split_seed, "valid_fraction": valid_fraction}

    def make_dataset(self, num_workers: int) -> ProcessedDataset:
        from geomol.data.datasets.nucleic_affinity import NucleicAffinityDataset

        return NucleicAffinityDataset(self.root, ids=self.ids, recipe=self.recipe, num_workers=num_workers,
                                      **self._dataset_kwargs())

    def build_splits(self) -> dict[str, ProcessedDataset]:
        dataset = self.load_dataset()
        tiers, clusters = dataset.column("tier"), dataset.column("cluster")
        keep = (lambda i: True) if self.tier_b == "include" else (lambda i: tiers[i] == "A")  # noqa: E731
        if self.split == "all":
            return {"train": dataset.subset([i for i in range(len(dataset)) if keep(i)]),
                    "valid": dataset.subset([]), "test": dataset.subset([])}
        args = self.split_args
        folds = nucleic_cluster_folds(clusters, tiers, n_folds=args["n_folds"], seed=args["seed"],
                                      valid_fraction=args["valid_fraction"])
        fold = folds[args["fold"]]
        parts = {"train": [i for i in fold["train"] if keep(i)], "valid": fold["valid"], "test": fold["test"]}
        check_no_leakage(parts, clusters)
        return {name: dataset.subset(indices) for name, indices in parts.items()}
