"""Leave-cluster-out folds of the nucleic-acid affinity set: whole sequence clusters on one side, never complexes.

Many complexes share one RNA with different ligands (25 A-site models, 21 purine riboswitches), so a split by
complex would test on receptors seen in training. :func:`nucleic_cluster_folds` moves whole clusters (the
folder's ``cluster`` column, :mod:`geomol.data.datasets.nucleic_affinity`):

* the clusters are dealt into ``n_folds`` folds, largest first (by tier-A complexes, then by all), each to the
  fold with the fewest tier-A complexes so far (ties: the fewest complexes; the order of equal clusters is
  shuffled with ``seed``), so every fold tests about as many trusted labels;
* fold ``k`` tests the complexes of its clusters: ``test`` the tier-A ones (the figures to report), ``test_b``
  the tier-B ones (reported apart: low-confidence labels);
* of the other clusters, a random ``valid_fraction`` (by tier-A complexes, at least one cluster) is the inner
  validation, where settings and epochs are chosen: ``valid`` holds their tier-A complexes; their tier-B ones are
  used nowhere, so that no cluster is on two sides;
* ``train`` holds every complex of the remaining clusters (tier B included: a trainer drops or weights them).

Every fold is checked (:func:`~geomol.data.splits.grouped.check_no_leakage`): no complex twice, no cluster in
two parts.
"""
from __future__ import annotations

import random
from typing import Hashable, Sequence

from geomol.data.splits.grouped import check_no_leakage, random_group_split
from geomol.errors import ConfigError

__all__ = ["PARTS", "nucleic_cluster_folds", "fold_parts_of_clusters"]

PARTS = ("train", "valid", "test", "test_b")


def _deal(clusters: Sequence[Hashable], trusted: Sequence[bool], n_folds: int, seed: int) -> dict[Hashable, int]:
    """The fold of every cluster holding tier-A (``trusted``) complexes (see the module notes)."""
    counts: dict[Hashable, list[int]] = {}
    for cluster, is_trusted in zip(clusters, trusted):
        count = counts.setdefault(cluster, [0, 0])
        count[0] += int(is_trusted)
        count[1] += 1
    order = sorted((c for c in counts if counts[c][0]), key=str)  # clusters without tier-A complexes are never tested
    random.Random(seed).shuffle(order)
    order.sort(key=lambda c: (counts[c][0], counts[c][1]), reverse=True)  # stable: ties keep the shuffled order
    load = [[0, 0] for _ in range(n_folds)]
    fold_of = {}
    for cluster in order:
        fold = min(range(n_folds), key=lambda f: (load[f][0], load[f][1], f))
        fold_of[cluster] = fold
        load[fold][0] += counts[cluster][0]
        load[fold][1] += counts[cluster][1]
    return fold_of


def fold_parts_of_clusters(clusters: Sequence[Hashable], tiers: Sequence[str], test_clusters: set,
                           valid_clusters: set) -> dict[str, list[int]]:
    """Item indices of :data:`PARTS` for the given test and validation clusters (module notes)."""
    parts: dict[str, list[int]] = {part: [] for part in PARTS}
    for i, (cluster, tier) in enumerate(zip(clusters, tiers)):
        if cluster in test_clusters:
            parts["test" if tier == "A" else "test_b"].append(i)
        elif cluster in valid_clusters:
            if tier == "A":
                parts["valid"].append(i)
        else:
            parts["train"].append(i)
    check_no_leakage({"train": parts["train"], "valid": parts["valid"], "held out": parts["test"] + parts["test_b"]},
                     list(clusters))
    return parts


def nucleic_cluster_folds(clusters: Sequence[Hashable], tiers: Sequence[str], *, n_folds: int = 5, seed: int = 0,
                          valid_fraction: float = 0.2) -> list[dict[str, list[int]]]:
    """``n_folds`` leave-cluster-out folds, each ``{part: item indices}`` for the parts of :data:`PARTS`.

    Args:
        clusters: the cluster of every item; tiers: its label tier (``'A'`` or ``'B'``).
        n_folds: folds (2 … the number of clusters holding tier-A items).
        seed: the shuffle of equal clusters and the draw of validation clusters (fold ``k`` draws with
            ``seed + k``).
        valid_fraction: of each fold's training tier-A complexes, the share (whole clusters) for inner validation;
            0: none (``valid`` empty).

    Raises:
        ConfigError: lengths differ, an unknown tier, or a fold count the clusters cannot fill.
        DatasetError: a fold leaks (a cluster on two sides; cannot happen by construction, checked anyway).
    """
    if len(clusters) != len(tiers):
        raise ConfigError(f"{len(clusters)} clusters but {len(tiers)} tiers")
    if set(tiers) - {"A", "B"}:
        raise ConfigError(f"tiers are 'A' or 'B', got {sorted(set(tiers) - {'A', 'B'})}")
    if not 0 <= valid_fraction < 1:
        raise ConfigError(f"valid_fraction must be in [0, 1), got {valid_fraction}")
    trusted = [t == "A" for t in tiers]
    tested = {c for c, t in zip(clusters, trusted) if t}
    if not 2 <= n_folds <= len(tested):
        raise ConfigError(f"n_folds={n_folds} needs 2 ≤ n_folds ≤ {len(tested)} (clusters with tier-A complexes)")
    fold_of = _deal(clusters, trusted, n_folds, seed)
    folds = []
    for k in range(n_folds):
        test_clusters = {c for c, f in fold_of.items() if f == k}
        rest = [i for i, c in enumerate(clusters) if c not in test_clusters and trusted[i]]
        valid_clusters: set = set()
        if valid_fraction > 0 and len({clusters[i] for i in rest}) > 1:
            picked = random_group_split([clusters[i] for i in rest], (1 - valid_fraction, valid_fraction),
                                        names=("train", "valid"), seed=seed + k)["valid"]
            valid_clusters = {clusters[rest[i]] for i in picked} or {clusters[rest[0]]}
        folds.append(fold_parts_of_clusters(clusters, tiers, test_clusters, valid_clusters))
    return folds
