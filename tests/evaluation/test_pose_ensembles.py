"""Pooling the scores of several poses per ligand (geomol.evaluation.pose_ensembles)."""
import numpy as np
import pytest

from geomol.evaluation.pose_ensembles import pool_scores, series_scores, summarise_pools


def test_pools_ignore_missing_poses_and_keep_seed_zero_as_the_single_pose():
    scores = np.array([[6.0, 7.0, np.nan], [np.nan, 5.0, 6.0], [np.nan, np.nan, np.nan]])
    pools = pool_scores(scores)
    assert pools["single"][0] == 6.0 and np.isnan(pools["single"][1])
    assert pools["mean"][:2].tolist() == [6.5, 5.5] and pools["max"][:2].tolist() == [7.0, 6.0]
    assert all(np.isnan(values[2]) for values in pools.values())


def test_series_are_scored_on_the_ligands_every_way_predicts():
    rng = np.random.default_rng(0)
    measured = np.arange(12, dtype=float)
    scores = measured[:, None] + rng.normal(0, 3, (12, 4))
    scores[0, 0] = np.nan  # no single pose for ligand 0: left out of every way
    row = series_scores(measured, scores, expert=measured + 0.1)
    assert row["ligands"] == 11 and row["expert"] == pytest.approx(1.0)
    pooled = scores[1:].mean(1)
    from geomol.metrics.scores import spearman
    assert row["mean"] == pytest.approx(spearman(pooled, measured[1:]))
    assert series_scores(measured[:5], scores[:5]) is None
    summary = summarise_pools([row, {**row, "mean": row["mean"] - 0.2}], ["mean"])
    assert summary["mean"]["series"] == 2
    assert summary["mean"]["minus_single"] == pytest.approx(row["mean"] - 0.1 - row["single"])
