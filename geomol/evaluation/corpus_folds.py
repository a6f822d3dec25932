"""The corpus cross-validation protocol's items and folds (``docs/evaluation.md``).

Items are the corpus (:func:`~geomol.data.datasets.corpus.read_corpus`: plb, fep_benchmark, uni_fep,
ddg_bindingdb) with protein clusters consistent across sources
(:func:`~geomol.data.splits.protein_clusters.load_protein_clusters`); folds leave whole clusters out, each with a
validation slice of its training clusters for model selection
(:func:`~geomol.data.splits.corpus.leave_cluster_out_folds`), and every fold is checked for leakage
(:func:`~geomol.data.splits.corpus.check_corpus_split`). Every variant — baselines, GET, the contact scorer —
is trained and scored on these folds.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from geomol.data.datasets.corpus import read_corpus
from geomol.data.datasets.corpus_items import Corpus
from geomol.data.splits.corpus import check_corpus_split, item_clusters, leave_cluster_out_folds
from geomol.data.splits.protein_clusters import load_protein_clusters
from geomol.errors import ConfigError

__all__ = ["PROTOCOL_SEED", "load_items", "checked_folds", "source_items"]

PROTOCOL_SEED = 0
"""The folds' seed: every variant of the protocol's table is scored on the folds of this seed."""


def load_items(root: Path, sources, series, cache_dir) -> tuple[list, list[str]]:
    """Corpus items (only the named ``series`` when given) and each item's protein cluster."""
    corpus = read_corpus(root, sources)
    if series:
        unknown = sorted(set(series) - {item.series for item in corpus.items})
        if unknown:
            raise ConfigError(f"unknown series {unknown}")
        items = [item for item in corpus.items if item.series in set(series)]
        used = {item.receptor for item in items}
        corpus = Corpus(items, [r for r in corpus.receptors if r.path in used])
    clusters, _ = load_protein_clusters(corpus.receptors, cache_dir=cache_dir)
    return corpus.items, item_clusters(corpus.items, clusters)


def checked_folds(items, clusters: list[str], n_folds: int, seed: int, valid_fraction: float = 0.1
                  ) -> tuple[list[dict], np.ndarray]:
    """Leave-cluster-out folds, each checked for leakage, and the test fold of every item."""
    folds = leave_cluster_out_folds(clusters, n_folds, valid_fraction=valid_fraction, seed=seed)
    for fold in folds:
        check_corpus_split(fold, items, clusters)
    check_corpus_split({f"fold{k}": fold["test"] for k, fold in enumerate(folds)}, items, clusters)
    fold_of = np.empty(len(items), dtype=int)
    for k, fold in enumerate(folds):
        fold_of[fold["test"]] = k
    return folds, fold_of


def source_items(fold_train: Sequence[int], series_keys: Sequence[str], sources: Sequence[str] | None = None
                 ) -> list[int]:
    """A fold's training items, only those of ``sources`` (series keys ``'<source>/...'``) when given."""
    return [i for i in fold_train if sources is None or str(series_keys[i]).split("/", 1)[0] in sources]
