"""Zero-shot ranking from SMILES with pose ensembles: several refined poses per SMILES, each scored, then pooled.

A SMILES posed on a reference ligand gets one pose per posing seed (:class:`~geomol.data.posing.poses.PoseParameters`
``seed``: other conformers, other core mappings tried first, other refinements); each pose is scored by the base
model, and the scores of one ligand are pooled (:data:`POOLS`): the first seed's alone (what ``predict-affinity
--reference`` does), their mean, their maximum (the pose the model likes best), their median. Each series is then
scored by Spearman against the measured pK on the ligands every way predicts (:func:`series_scores`), beside the
expert poses' scores where there are some.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from geomol.metrics.scores import mean_of, spearman

__all__ = ["POOLS", "pool_scores", "series_scores", "summarise_pools"]

POOLS = ("single", "mean", "max", "median")
"""How one ligand's pose scores are pooled (see the module notes)."""


def pool_scores(scores: np.ndarray) -> dict[str, np.ndarray]:
    """``scores``: ``(n_ligands, n_seeds)`` pK of each ligand's poses (NaN where a seed gave none; seed 0 first).
    Returns every pool's ``(n_ligands,)`` pK (NaN for a ligand without any pose; ``single``: NaN without seed 0's)."""
    scores = np.asarray(scores, dtype=np.float64)
    posed = np.isfinite(scores).any(1)
    filled = np.where(np.isfinite(scores), scores, np.nan)
    out = {"single": scores[:, 0].copy()}
    with np.errstate(all="ignore"):
        for name, pool in (("mean", np.nanmean), ("max", np.nanmax), ("median", np.nanmedian)):
            values = np.full(len(scores), np.nan)
            if posed.any():
                values[posed] = pool(filled[posed], axis=1)
            out[name] = values
    return out


def series_scores(measured: Sequence[float], scores: np.ndarray, expert: Sequence[float] | None = None,
                  min_ligands: int = 10) -> dict[str, float] | None:
    """Spearman of every pool (and of the expert poses' scores, ``expert``) with ``measured`` on the ligands all of
    them predict; None when fewer than ``min_ligands`` are left."""
    pools = pool_scores(scores)
    if expert is not None:
        pools["expert"] = np.asarray(expert, dtype=np.float64)
    y = np.asarray(measured, dtype=np.float64)
    keep = np.isfinite(y) & np.all([np.isfinite(v) for v in pools.values()], axis=0)
    if keep.sum() < min_ligands:
        return None
    return {name: spearman(values[keep], y[keep]) for name, values in pools.items()} | {"ligands": int(keep.sum())}


def summarise_pools(rows: Sequence[Mapping[str, float]], names: Sequence[str]) -> dict[str, dict[str, float]]:
    """Mean Spearman over series of every way in ``names``, and each pool's paired difference to ``single`` ± one
    standard error over series."""
    out = {}
    for name in names:
        diff = np.array([r[name] - r["single"] for r in rows if np.isfinite(r[name] - r["single"])])
        se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else float("nan")
        out[name] = {"mean_spearman": mean_of(r[name] for r in rows), "minus_single": float(diff.mean())
                     if len(diff) else float("nan"), "minus_single_se": se, "series": len(rows)}
    return out
