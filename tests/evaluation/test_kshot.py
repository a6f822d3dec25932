"""The k-shot protocol (geomol.evaluation.kshot, anchor_fit, kshot_summary) on synthetic series: draws never score a
measured ligand, budgets follow the series' size, priors are recovered from series drawn from them, and the tables
pair methods per target."""
from __future__ import annotations

import numpy as np
import pytest

from geomol.evaluation.anchor_fit import calibrate_intervals, fit_kernel, fit_settings, standardised_errors
from geomol.evaluation.kshot import (KSHOT_METHODS, KShotSettings, SeriesData, distinct_compounds, draw_record,
                                     eligible, series_rows)
from geomol.evaluation.kshot_summary import choose_methods, format_kshot, summarise_kshot
from geomol.inference.anchoring import AnchorKernel, minmax_similarity

TRUE = AnchorKernel(level=0.8, slope=0.2, similarity=0.7, noise=0.3)


def drawn_series(n: int, seed: int, kernel: AnchorKernel = TRUE, source: str = "fep_benchmark") -> SeriesData:
    """A series whose residuals from the base model are a draw of ``kernel``'s Gaussian process."""
    rng = np.random.default_rng(seed)
    fingerprints = rng.poisson(0.4, (n, 48)).astype(float)
    fingerprints[:, :6] += 2
    base = rng.normal(6.5, 0.8, n)
    cov = (kernel.level ** 2 + kernel.slope ** 2 * np.outer(base - base.mean(), base - base.mean())
           + kernel.similarity ** 2 * minmax_similarity(fingerprints, fingerprints) + kernel.noise ** 2 * np.eye(n))
    measured = base + rng.multivariate_normal(np.zeros(n), cov)
    descriptors = np.column_stack([fingerprints.sum(1), rng.normal(size=(n, 10))])
    finetune = lambda chosen, rest: base[rest] + 0.01 * rng.normal(size=len(rest))  # noqa: E731
    return SeriesData(f"{source}/s{seed}", source, seed % 5, [f"l{i}" for i in range(n)], measured, base,
                      fingerprints, descriptors, finetune)


def test_distinct_compounds_keep_one_pose_of_each_compound():
    names = ["lig 1", "lig 2", "lig 2, deprot", "lig 3", "lig 4"]
    smiles = ["CCO", "CCN", "CC[NH3+]", "CCO", "CCC"]
    assert distinct_compounds(names, smiles).tolist() == [0, 1, 4]


def test_a_draw_scores_only_the_unmeasured_ligands_with_every_method():
    series = drawn_series(30, 1)
    chosen = np.array([0, 4, 9, 11, 20])
    record = draw_record(series, chosen, KShotSettings(TRUE))
    assert record["rest"] == 25 and record["chosen"] == chosen.tolist()
    assert set(record["spearman"]) == set(KSHOT_METHODS)
    assert set(record["inside"]) == {"residual", "ligand_gp"} and 0 <= record["inside"]["residual"] <= 25
    none = draw_record(series, np.array([], dtype=int), KShotSettings(TRUE))
    assert set(none["spearman"]) == {"base", "residual"}
    assert none["spearman"]["residual"] == pytest.approx(none["spearman"]["base"])


def test_budgets_follow_the_series_size_and_k0_is_one_draw():
    assert eligible(15, 10) and not eligible(14, 10) and not eligible(9, 0) and eligible(10, 3)
    rows = series_rows(drawn_series(14, 2), [0, 3, 10], 4, np.random.default_rng(0), KShotSettings(TRUE))
    assert [r["k"] for r in rows] == [0, 3] and [len(r["draws"]) for r in rows] == [1, 4]
    for row in rows:
        for draw in row["draws"]:
            assert len(set(draw["chosen"])) == row["k"]


def test_priors_fitted_on_series_drawn_from_them_are_recovered():
    series = [drawn_series(40, seed) for seed in range(40)]
    fitted = fit_kernel(series)
    assert fitted.noise == pytest.approx(TRUE.noise, rel=0.35)
    assert fitted.similarity == pytest.approx(TRUE.similarity, rel=0.35)
    assert fitted.level == pytest.approx(TRUE.level, rel=0.35)
    rows = [row for s in series[:20] for row in series_rows(s, [10], 3, np.random.default_rng(s.fold),
                                                             KShotSettings(fitted))]
    summary = summarise_kshot(rows, {"synthetic": ("fep_benchmark",)}, [10])
    # calibrated: the nominal 68 % interval holds about 68 % of the held-out values
    assert 0.6 <= summary[0]["coverage_68"]["residual"][0] <= 0.76
    assert summary[0]["minus_base"][0] > 0  # the anchors help where the residuals are shared by analogues


def test_settings_fitted_on_validation_series_and_tables():
    series = [drawn_series(25, seed) for seed in range(8)]
    settings, record = fit_settings(series, power_grid=(0.0, 4.0), ks=(5,), draws=1, calibration_ks=(0, 5))
    assert settings.power in (0.0, 4.0) and record["series"] == 8 and set(record["power_scores"]) == {"0.0", "4.0"}
    assert set(record["interval_scale"]) == {"0", "5"} and settings.interval.factor(5) > 0
    tuning = record["kernel_tuning"]
    assert set(tuning) == {"0.5x1", "0.5x3", "1x1", "1x3", "2x1", "2x3", "sd_factor"} and tuning["sd_factor"] > 0
    # a common factor on every sd leaves the predictions and only calibrates the ±
    likelihood = AnchorKernel(**record["likelihood_kernel"])
    assert settings.kernel.noise / likelihood.noise == pytest.approx(tuning["sd_factor"])
    rows = [row for s in series for row in series_rows(s, [0, 5], 2, np.random.default_rng(1), settings)]
    summary = summarise_kshot(rows, {"synthetic": ("fep_benchmark",), "none": ("plb",)}, [0, 5])
    assert [(r["group"], r["k"], r["n_targets"]) for r in summary] == [("synthetic", 0, 8), ("synthetic", 5, 8)]
    five = summary[1]
    diffs = [r["mean"]["residual"] - r["mean"]["base"] for r in rows if r["k"] == 5]
    assert five["minus_base"][0] == pytest.approx(np.mean(diffs)) and five["minus_base"][2] == 8
    assert five["best_ligand_only"] in ("ligand_gp", "ligand_rf", "hac_k_fit")
    table = format_kshot(summary)
    assert "**synthetic**" in table and table.count("\n| 5 | 8 |") == 1
    chosen = choose_methods(rows, [0, 5], ["base", "anchored", "residual"])
    assert chosen[0] == "base" and chosen[5] in ("anchored", "residual")


def test_intervals_calibrated_per_budget_hold_68_percent_at_every_budget():
    # the prior misses the series' offset (level 0.05 for a true 0.8): without anchors its ± is far too narrow,
    # while anchors reveal the offset; one factor per budget, fitted on other series, calibrates each budget
    wrong = AnchorKernel(level=0.05, slope=TRUE.slope, similarity=TRUE.similarity, noise=TRUE.noise)
    validation = [drawn_series(30, seed) for seed in range(30)]
    held_out = [drawn_series(30, seed) for seed in range(100, 130)]
    scale = calibrate_intervals(validation, wrong, (0, 3, 10), draws=3)
    assert scale.factor(0) > 1.3 and scale.factor(0) > scale.factor(10)

    def coverage(settings, k):
        z = standardised_errors(held_out, settings, (k,), 3, seed=1)[k]
        return np.mean(np.asarray(z) <= 1.0)

    assert coverage(KShotSettings(wrong), 0) < 0.55
    for k in (0, 3, 10):
        assert 0.6 <= coverage(KShotSettings(wrong, interval=scale), k) <= 0.76
