"""Splits of the affinity corpus by protein cluster, and the check that nothing straddles them.

Every split here moves whole protein clusters (:mod:`geomol.data.splits.protein_clusters`): a protein
seen in training is never the protein of a validation or test item, whichever source the items
come from. :func:`check_corpus_split` verifies a split: no item twice, every item placed, no
cluster and no identical ligand–protein pair (canonical SMILES + cluster) in two parts.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from geomol.data.datasets.corpus_items import SOURCES, CorpusItem
from geomol.data.splits.protein_clusters import ProteinClusters
from geomol.data.splits.grouped import check_no_leakage, group_kfold, random_group_split
from geomol.errors import ConfigError

__all__ = ["item_clusters", "ligand_protein_pairs", "corpus_split", "leave_cluster_out_folds", "check_corpus_split",
           "split_counts", "format_split_counts", "format_split_summary"]


def item_clusters(items: Sequence[CorpusItem], clusters: ProteinClusters) -> list[str]:
    """The protein cluster of each item (through its receptor file)."""
    return [clusters.of(item.receptor) for item in items]


def ligand_protein_pairs(items: Sequence[CorpusItem], cluster_labels: Sequence[str]) -> list[tuple[str, str]]:
    """``(cluster, canonical SMILES)`` per item: one compound on one protein, whichever source measured it."""
    return [(cluster, item.smiles) for item, cluster in zip(items, cluster_labels)]


def corpus_split(cluster_labels: Sequence[str], fractions: Sequence[float] = (0.8, 0.1, 0.1), *, seed: int = 0
                 ) -> dict[str, list[int]]:
    """``{'train', 'valid', 'test'}`` item indices, whole clusters at a time, sized by item fractions."""
    return random_group_split(cluster_labels, fractions, seed=seed)


def leave_cluster_out_folds(cluster_labels: Sequence[str], n_splits: int = 5, *, valid_fraction: float = 0.1,
                            seed: int = 0) -> list[dict[str, list[int]]]:
    """K folds by cluster; in each, ``valid`` is a slice of the training clusters (for model selection).

    Returns:
        Per fold ``{'train': [...], 'valid': [...], 'test': [...]}`` item indices; the test parts of
        the folds partition the items.
    """
    if not 0 <= valid_fraction < 1:
        raise ConfigError(f"valid_fraction must be in [0, 1), got {valid_fraction}")
    folds = []
    for fold, (train, test) in enumerate(group_kfold(cluster_labels, n_splits, seed=seed)):
        inner = random_group_split([cluster_labels[i] for i in train], (1 - valid_fraction, valid_fraction),
                                   names=("train", "valid"), seed=seed + fold)
        folds.append({"train": [train[i] for i in inner["train"]], "valid": [train[i] for i in inner["valid"]],
                      "test": test})
    return folds


def check_corpus_split(parts: Mapping[str, Sequence[int]], items: Sequence[CorpusItem],
                       cluster_labels: Sequence[str], *, complete: bool = True) -> None:
    """Raise :class:`~geomol.errors.DatasetError` if a cluster or a ligand–protein pair is in two parts,
    an item is placed twice, or (``complete``) an item is in no part."""
    check_no_leakage(parts, cluster_labels, ligand_protein_pairs(items, cluster_labels),
                     num_items=len(items) if complete else None)


def split_counts(parts: Mapping[str, Sequence[int]], items: Sequence[CorpusItem]) -> dict[str, dict[str, int]]:
    """``{part: {source: items}}`` (sources in corpus order, then any other)."""
    return {part: {source: sum(1 for i in indices if items[i].source == source)
                   for source in dict.fromkeys([*SOURCES, *(item.source for item in items)])}
            for part, indices in parts.items()}


def format_split_counts(counts: Mapping[str, Mapping[str, int]]) -> str:
    """A plain-text table of :func:`split_counts`: one row per source, one column per part."""
    parts = list(counts)
    sources = [s for s in dict.fromkeys(s for row in counts.values() for s in row)
               if any(counts[p].get(s) for p in parts)]
    lines = [f"{'source':<15}" + "".join(f"{p:>9}" for p in parts)]
    lines += [f"{s:<15}" + "".join(f"{counts[p].get(s, 0):>9}" for p in parts) for s in sources]
    lines.append(f"{'all':<15}" + "".join(f"{sum(counts[p].values()):>9}" for p in parts))
    return "\n".join(lines)


def format_split_summary(parts: Mapping[str, Sequence[int]], items: Sequence[CorpusItem],
                         cluster_labels: Sequence[str]) -> str:
    """:func:`format_split_counts` plus, per part, its number of series and of protein clusters."""
    lines = [format_split_counts(split_counts(parts, items))]
    for what, key in (("series", lambda i: items[i].series), ("clusters", lambda i: cluster_labels[i])):
        lines.append(f"{what:<15}" + "".join(f"{len({key(i) for i in indices}):>9}" for indices in parts.values()))
    return "\n".join(lines)
