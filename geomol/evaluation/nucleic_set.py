"""The nucleic-acid affinity set as the cross-validation reads it: graphs, labels, tiers, clusters and folds.

:func:`nucleic_set` builds (or reads from the processed store) every complex of a ``nucleic_affinity`` folder
(:class:`~geomol.data.datasets.nucleic_affinity.NucleicAffinityDataset`) and deals the leave-cluster-out folds
(:func:`~geomol.data.splits.nucleic.nucleic_cluster_folds`). Features that several models read are computed once
per set: the contact rows of a :class:`~geomol.data.chemistry.contact_recipe.ContactRecipe`
(:meth:`NucleicSet.contacts`) and the ligands' Morgan counts and descriptors (:meth:`NucleicSet.ligand_features`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from geomol.data.blocks import BlockGraph
from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.splits.nucleic import nucleic_cluster_folds
from geomol.training.contact_scorer import ContactData, contact_views

__all__ = ["FOLD_PROTOCOL", "NucleicSet", "nucleic_set", "nucleic_set_of", "tier_weights"]

FOLD_PROTOCOL = {"n_folds": 5, "seed": 0, "valid_fraction": 0.2}
"""The folds every model of the nucleic-acid table is measured on (docs/evaluation.md)."""


@dataclass
class NucleicSet:
    """Every complex of the set and the protocol's folds.

    Attributes:
        ids, graphs: item ids and complex graphs (labelled, built with ``recipe``); label: ``(n,)`` pK;
        tiers: ``'A'``/``'B'`` per item; clusters: the sequence cluster per item; na_types: ``'RNA'``/``'DNA'``;
        heavy: ``(n,)`` ligand heavy atoms; folds: per fold, item indices of ``train``, ``valid``, ``test`` (tier
        A) and ``test_b`` (tier B); recipe: how the graphs were built; protocol: the folds' settings.
    """

    ids: list[str]
    graphs: list[BlockGraph]
    label: np.ndarray
    tiers: np.ndarray
    clusters: np.ndarray
    na_types: np.ndarray
    heavy: np.ndarray
    folds: list[dict[str, list[int]]]
    recipe: ComplexRecipe
    protocol: dict
    _contacts: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def contacts(self, recipe: ContactRecipe) -> ContactData:
        """The items' contact rows by ``recipe`` (computed once per recipe), all items one group (``'all'``):
        the pooled ranking the table scores."""
        key = tuple(sorted(recipe.to_dict().items()))
        if key not in self._contacts:
            recipe.check_pocket(self.recipe.pocket_cutoff, "the nucleic-acid complexes")
            self._contacts[key] = contact_views(self.graphs, recipe, self.label, ["all"] * len(self))[0]
        return self._contacts[key]

    def ligand_features(self) -> np.ndarray:
        """``(n, Morgan bits + descriptors)``: the ligand-only models' rows (the receptor is not read)."""
        return np.stack([np.concatenate([g.ligand_morgan.reshape(-1).double().numpy(),
                                         g.ligand_descriptors.reshape(-1).double().numpy()]) for g in self.graphs])

    def held_out(self, fold: dict) -> np.ndarray:
        """A fold's held-out items: its tier-A test items, then its tier-B ones."""
        return np.asarray(list(fold["test"]) + list(fold["test_b"]), dtype=np.int64)


def tier_weights(tiers: Sequence[str], tier_b_weight: float) -> np.ndarray:
    """``(n,)`` training weights: 1 for tier A, ``tier_b_weight`` for tier B (0: tier B left out)."""
    return np.where(np.asarray(tiers) == "A", 1.0, float(tier_b_weight))


def nucleic_set(root: str, *, recipe: ComplexRecipe | None = None, cache_dir: str | None = None, workers: int = 0,
                n_folds: int = FOLD_PROTOCOL["n_folds"], seed: int = FOLD_PROTOCOL["seed"],
                valid_fraction: float = FOLD_PROTOCOL["valid_fraction"]) -> NucleicSet:
    """Every complex of the folder ``root`` (both tiers) and the folds (module notes).

    Raises:
        DatasetError: the folder is unreadable (:func:`~geomol.data.datasets.nucleic_affinity.read_nucleic_labels`).
    """
    from geomol.data.datasets.nucleic_affinity import NucleicAffinityDataset

    recipe = recipe or ComplexRecipe()
    dataset = NucleicAffinityDataset(root, recipe=recipe, cache_dir=cache_dir, num_workers=workers, progress=False)
    return nucleic_set_of(dataset, recipe, n_folds=n_folds, seed=seed, valid_fraction=valid_fraction)


def nucleic_set_of(dataset, recipe: ComplexRecipe, *, n_folds: int = FOLD_PROTOCOL["n_folds"],
                   seed: int = FOLD_PROTOCOL["seed"],
                   valid_fraction: float = FOLD_PROTOCOL["valid_fraction"]) -> NucleicSet:
    """:func:`nucleic_set` of an already built :class:`~geomol.data.datasets.nucleic_affinity.NucleicAffinityDataset`
    (its graphs built with ``recipe``)."""
    graphs = [dataset[i] for i in range(len(dataset))]
    tiers, clusters = np.asarray(dataset.column("tier")), np.asarray(dataset.column("cluster"))
    folds = nucleic_cluster_folds(clusters.tolist(), tiers.tolist(), n_folds=n_folds, seed=seed,
                                  valid_fraction=valid_fraction)
    return NucleicSet([g.name for g in graphs], graphs, np.asarray([float(g.y) for g in graphs]), tiers, clusters,
                      np.asarray(dataset.column("na_type")), np.asarray(dataset.column("ligand_heavy_atoms"), float),
                      folds, recipe, {"n_folds": n_folds, "seed": seed, "valid_fraction": valid_fraction})
