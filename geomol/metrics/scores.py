"""Evaluation metrics for affinity regression and pair classification.

Plain functions on 1-D tensors (or anything ``torch.as_tensor`` accepts) so that training,
cross-validation scripts and the model card compute the numbers the same way.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Hashable, Iterable, Sequence

import torch

__all__ = ["pearson", "spearman", "kendall_tau", "rmse", "mae", "regression_report", "grouped_regression_report",
           "auroc", "auprc", "rank", "mean_of"]


def _as_1d(x) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float64).reshape(-1)


def rank(x) -> torch.Tensor:
    """Ranks 0..n−1 with ties given their average rank (as used by Spearman's ρ)."""
    x = _as_1d(x)
    order = torch.argsort(x, stable=True)
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(len(x), dtype=x.dtype)
    sorted_x = x[order]
    # average the ranks of tied runs
    _, inverse, counts = torch.unique_consecutive(sorted_x, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts), dtype=x.dtype).index_add_(0, inverse, ranks[order])
    ranks[order] = (sums / counts)[inverse]
    return ranks


def pearson(pred, target) -> float:
    """Pearson correlation; ``nan`` when fewer than 2 points or a constant input."""
    p, t = _as_1d(pred), _as_1d(target)
    if len(p) < 2:
        return float("nan")
    p, t = p - p.mean(), t - t.mean()
    denom = p.norm() * t.norm()
    return float((p @ t) / denom) if denom > 0 else float("nan")


def spearman(pred, target) -> float:
    """Spearman rank correlation (Pearson of tie-averaged ranks)."""
    return pearson(rank(pred), rank(target))


def kendall_tau(pred, target) -> float:
    """Kendall's τ-b: (concordant − discordant pairs) / sqrt of the pairs untied in each input.

    ``nan`` when fewer than 2 points or an input is constant. O(n²) memory: meant for one target's
    ligands (tens to hundreds), not for pooled sets of many thousands.
    """
    p, t = _as_1d(pred), _as_1d(target)
    if len(p) < 2:
        return float("nan")
    upper = torch.triu(torch.ones(len(p), len(p), dtype=torch.bool), diagonal=1)
    dp = torch.sign(p[:, None] - p[None, :])[upper]
    dt = torch.sign(t[:, None] - t[None, :])[upper]
    untied = (dp != 0).sum() * (dt != 0).sum()
    return float((dp * dt).sum() / untied.to(torch.float64).sqrt()) if untied > 0 else float("nan")


def rmse(pred, target) -> float:
    """Root-mean-square error, in the units of the inputs (pK units for affinities)."""
    return float(((_as_1d(pred) - _as_1d(target)) ** 2).mean().sqrt())


def mae(pred, target) -> float:
    """Mean absolute error."""
    return float((_as_1d(pred) - _as_1d(target)).abs().mean())


def regression_report(pred, target) -> dict[str, float]:
    """``{'pearson', 'spearman', 'rmse', 'mae', 'n'}`` for one set of predictions."""
    return {"pearson": pearson(pred, target), "spearman": spearman(pred, target),
            "rmse": rmse(pred, target), "mae": mae(pred, target), "n": float(len(_as_1d(pred)))}


def grouped_regression_report(pred, target, groups: Sequence[Hashable]) -> dict[Hashable, dict[str, float]]:
    """:func:`regression_report` per group (e.g. per protein target), in first-seen order."""
    pred, target = _as_1d(pred), _as_1d(target)
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    return {g: regression_report(pred[idx], target[idx]) for g, idx in members.items()}


def auroc(score, label) -> float:
    """Area under the ROC curve (probability a positive outranks a negative, ties count ½)."""
    s, y = _as_1d(score), _as_1d(label) > 0.5
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = rank(s)
    return float((r[y].sum() - n_pos * (n_pos - 1) / 2) / (n_pos * n_neg))


def auprc(score, label) -> float:
    """Area under the precision–recall curve as average precision (step-wise, ties grouped)."""
    s, y = _as_1d(score), (_as_1d(label) > 0.5).to(torch.float64)
    n_pos = float(y.sum())
    if n_pos == 0:
        return float("nan")
    order = torch.argsort(s, descending=True, stable=True)
    s, y = s[order], y[order]
    tp = torch.cumsum(y, 0)
    # evaluate only at the last position of each run of tied scores
    last = torch.ones_like(s, dtype=torch.bool)
    last[:-1] = s[1:] != s[:-1]
    tp, k = tp[last], torch.arange(1, len(s) + 1, dtype=s.dtype)[last]
    precision, recall = tp / k, tp / n_pos
    prev_recall = torch.cat([recall.new_zeros(1), recall[:-1]])
    return float(((recall - prev_recall) * precision).sum())


def mean_of(values: Iterable[float]) -> float:
    """Mean ignoring NaNs (e.g. per-target correlations of targets with < 2 ligands)."""
    v = torch.tensor([x for x in values], dtype=torch.float64)
    v = v[~torch.isnan(v)]
    return float(v.mean()) if len(v) else float("nan")
