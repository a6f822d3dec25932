"""Ligand-only baselines: selection on the validation slice only, by mean per-target Spearman."""
from __future__ import annotations

import numpy as np
import pytest

from geomol.errors import ConfigError
from geomol.training.ligand_baselines import select_ligand_model


def _data(seed: int = 0):
    """60 items, 3 features; pK rises with feature 0. Rows 40-59 are 'test' rows filled with NaN."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(60, 3))
    y = 2.0 * x[:, 0] + 0.1 * rng.normal(size=60)
    x[40:] = np.nan  # any use of a test row would fail the fit or give NaN scores
    train, valid = list(range(30)), list(range(30, 40))
    keys = ["t1"] * 5 + ["t2"] * 5
    return x, y, train, valid, keys


def test_random_forest_chosen_on_validation_ranking_without_touching_other_rows():
    x, y, train, valid, keys = _data()
    # leaves of 30 items make the forest predict one constant: no ranking, never chosen
    grid = [{"n_estimators": 10, "max_features": 1.0, "min_samples_leaf": 30},
            {"n_estimators": 10, "max_features": 1.0, "min_samples_leaf": 1}]
    selection = select_ligand_model("rf", x, y, train, valid, keys, min_ligands=5, grid=grid)
    assert selection.params["min_samples_leaf"] == 1
    assert selection.score > 0.8 and selection.tried[0]["score"] == -np.inf
    assert np.isfinite(selection.model.predict(x[valid])).all()


def test_boosting_scores_every_stage():
    x, y, train, valid, keys = _data(1)
    grid = [{"learning_rate": 0.1, "max_leaf_nodes": 4, "min_samples_leaf": 2, "l2_regularization": 0.0,
             "stages": (1, 30)}]
    selection = select_ligand_model("gbm", x, y, train, valid, keys, min_ligands=5, grid=grid)
    assert [t["params"]["max_iter"] for t in selection.tried] == [1, 30]
    assert selection.params["max_iter"] == 30 and selection.model.n_iter_ == 30
    # the kept first stage was not grown by the later one
    first = select_ligand_model("gbm", x, y, train, valid, keys, min_ligands=5,
                                grid=[{**grid[0], "stages": (1,)}])
    assert first.model.n_iter_ == 1


def test_validation_without_targets_falls_back_to_rmse_and_bad_kind_is_named():
    x, y, train, valid, _ = _data(2)
    selection = select_ligand_model("rf", x, y, train, valid, ["t"] * 10, min_ligands=20,
                                    grid=[{"n_estimators": 5, "max_features": 1.0, "min_samples_leaf": 1}])
    assert selection.score < 0  # −RMSE
    with pytest.raises(ConfigError, match="one of"):
        select_ligand_model("svm", x, y, train, valid, ["t"] * 10)


def test_within_series_boosting_learns_differences_not_series_levels():
    """Each series has its own pK level (unlearnable from the ligand); within a series pK rises with feature 0.
    The within-series model ranks the held-out series; its predictions are differences within each series."""
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(12), 10)
    x = rng.normal(size=(120, 3))
    x[:, 1] = np.repeat(rng.normal(size=12), 10)  # feature 1 constant within a series: says nothing inside one
    level = rng.normal(scale=5.0, size=12)[groups] + 3.0 * x[:, 1]  # series levels, partly from feature 1
    y = level + 2.0 * x[:, 0] + 0.1 * rng.normal(size=120)
    train, valid, test = np.arange(80), np.arange(80, 100), np.arange(100, 120)
    grid = [{"learning_rate": 0.1, "max_leaf_nodes": 4, "min_samples_leaf": 2, "l2_regularization": 0.0,
             "stages": (50,)}]
    selection = select_ligand_model("gbm_series", x, y, train, valid, groups[valid].tolist(), min_ligands=5,
                                    grid=grid, groups=groups)
    pred = selection.predict(x[test], groups[test])
    for g in (10, 11):
        rows = groups[test] == g
        assert np.corrcoef(pred[rows], y[test][rows])[0, 1] > 0.8
        assert abs(pred[rows].mean()) < 0.5  # a difference within the series, not the series' level
    with pytest.raises(ConfigError, match="series"):
        select_ligand_model("gbm_series", x, y, train, valid, groups[valid].tolist(), grid=grid)
    with pytest.raises(ConfigError, match="series"):
        selection.predict(x[test])
