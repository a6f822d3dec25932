"""Per-target ranking metrics: how affinity models are judged on the corpus.

A user asks "which of my compounds binds best to MY protein", so a model is scored within
*targets*, never on a pooled set (pooled correlations mostly reward telling proteins apart).

**Target** (the one definition, used by every benchmark): by default a corpus **series**
(``CorpusItem.series``: one plb target, FEP series, Uni-FEP system or BindingDB-DDG PDB folder —
one protein, one assay context) with at least :data:`MIN_TARGET_LIGANDS` (10) measured ligands.
``by="cluster"`` takes a protein cluster instead (all series of one protein pooled, which mixes
assays). Smaller sets are not scored (a correlation over < 10 ligands is mostly noise); their
items still train models.

Per target: Spearman, Pearson and Kendall τ-b of prediction vs measured pK; the heavy-atom count
(HAC) scored the same way; and the Spearman between prediction and HAC (how much a model's ranking
is a ranking by ligand size). A model *beats HAC* on a target when its Spearman is strictly higher.
Summaries average over targets, for the expert-pose sources (:data:`EXPERT_POSE_SOURCES`, targets
built from their items only) and for all sources. Plain functions on arrays; no model, no Lightning.
"""
from __future__ import annotations

import math
from typing import Hashable, Iterable, Mapping, Sequence

from geomol.errors import ConfigError
from geomol.metrics.scores import kendall_tau, mean_of, pearson, spearman

__all__ = ["MIN_TARGET_LIGANDS", "EXPERT_POSE_SOURCES", "TARGET_KINDS", "target_keys", "target_members",
           "score_target", "score_targets", "summarise_targets", "evaluate_targets"]

MIN_TARGET_LIGANDS = 10
EXPERT_POSE_SOURCES = ("plb", "fep_benchmark")
TARGET_KINDS = ("series", "cluster")


def target_keys(items: Sequence, cluster_labels: Sequence[str], by: str = "series") -> list[str]:
    """The target each item belongs to: its ``series``, or (``by="cluster"``) its protein cluster."""
    if by not in TARGET_KINDS:
        raise ConfigError(f"targets are one of {TARGET_KINDS}, got {by!r}")
    if by == "series":
        return [item.series for item in items]
    if len(cluster_labels) != len(items):
        raise ConfigError(f"{len(cluster_labels)} cluster labels for {len(items)} items")
    return [f"cluster/{label}" for label in cluster_labels]


def target_members(keys: Sequence[Hashable], min_ligands: int = MIN_TARGET_LIGANDS,
                   include: Sequence[bool] | None = None) -> dict[Hashable, list[int]]:
    """Item indices per target with at least ``min_ligands`` included items, targets in first-seen order.

    Args:
        keys: the target of each item (:func:`target_keys`).
        include: per item, whether it takes part (e.g. it has a prediction, or comes from the
            expert-pose sources); all items when ``None``.
    """
    members: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        if include is None or include[i]:
            members.setdefault(key, []).append(i)
    return {key: idx for key, idx in members.items() if len(idx) >= min_ligands}


def score_target(pred: Sequence[float], label: Sequence[float], heavy_atoms: Sequence[float]) -> dict[str, float]:
    """One target's scores: ``n``, ``spearman``, ``pearson``, ``kendall`` (prediction vs pK),
    ``hac_spearman`` (heavy-atom count vs pK), ``spearman_with_hac`` (prediction vs heavy-atom count)
    and ``beats_hac`` (1.0 when ``spearman > hac_spearman``, 0.0 otherwise, ``nan`` if either is undefined)."""
    rho, hac_rho = spearman(pred, label), spearman(heavy_atoms, label)
    beats = float("nan") if math.isnan(rho) or math.isnan(hac_rho) else float(rho > hac_rho)
    return {"n": len(label), "spearman": rho, "pearson": pearson(pred, label), "kendall": kendall_tau(pred, label),
            "hac_spearman": hac_rho, "spearman_with_hac": spearman(pred, heavy_atoms), "beats_hac": beats}


def score_targets(pred: Sequence[float], label: Sequence[float], heavy_atoms: Sequence[float],
                  members: Mapping[Hashable, Sequence[int]]) -> dict[Hashable, dict[str, float]]:
    """:func:`score_target` for every target of ``members`` (item indices into the three sequences)."""
    return {key: score_target([pred[i] for i in idx], [label[i] for i in idx], [heavy_atoms[i] for i in idx])
            for key, idx in members.items()}


def summarise_targets(per_target: Mapping[Hashable, Mapping[str, float]],
                      selected: Iterable[Hashable] | None = None) -> dict[str, float]:
    """Means over targets (all, or the ``selected`` ones) of :func:`score_target`'s scores.

    Returns:
        ``targets``, ``items``, ``spearman``, ``pearson``, ``kendall``, ``hac_spearman``,
        ``spearman_with_hac`` (means, NaNs skipped) and ``beats_hac_fraction`` (fraction of the
        targets with both Spearmans defined where the model's is higher).
    """
    keys = list(per_target) if selected is None else [k for k in selected if k in per_target]
    rows = [per_target[k] for k in keys]
    summary = {"targets": len(rows), "items": sum(int(r["n"]) for r in rows)}
    for name in ("spearman", "pearson", "kendall", "hac_spearman", "spearman_with_hac"):
        summary[name] = mean_of(r[name] for r in rows)
    summary["beats_hac_fraction"] = mean_of(r["beats_hac"] for r in rows)
    return summary


def evaluate_targets(pred: Sequence[float], label: Sequence[float], heavy_atoms: Sequence[float],
                     keys: Sequence[Hashable], sources: Sequence[str], *, include: Sequence[bool] | None = None,
                     min_ligands: int = MIN_TARGET_LIGANDS) -> dict[str, dict]:
    """The protocol on one set of predictions: per-target scores and summaries for expert-pose and all sources.

    Args:
        pred, label, heavy_atoms: per item, the prediction, the measured pK and the ligand's heavy atoms.
        keys: per item, its target (:func:`target_keys`); sources: per item, its corpus source.
        include: per item, whether it has a prediction to score (all when ``None``).

    Returns:
        ``{"expert_pose": {"summary", "per_target"}, "all": {"summary", "per_target"}}``; the
        expert-pose targets are formed from expert-pose items only.
    """
    included = [True] * len(keys) if include is None else list(include)
    expert = [ok and source in EXPERT_POSE_SOURCES for ok, source in zip(included, sources)]
    out = {}
    for name, chosen in (("expert_pose", expert), ("all", included)):
        per_target = score_targets(pred, label, heavy_atoms, target_members(keys, min_ligands, chosen))
        out[name] = {"summary": summarise_targets(per_target), "per_target": per_target}
    return out
