"""Predictions anchored on a series' measured ligands (geomol.inference.anchoring, anchored_series): the residual
Gaussian process and the anchored average on synthetic series, leave-self-out, the fallback without measurements,
the ranking of candidates, and the anchors kept in a model's manifest."""
from __future__ import annotations

import numpy as np
import pytest

from geomol.errors import ConfigError
from geomol.inference.anchored_series import AnchoredSeries, AnchoringSettings
from geomol.inference.anchoring import (AnchorKernel, Anchors, anchored_average, minmax_similarity, next_best,
                                        residual_predictions)
from geomol.inference.interval_scale import IntervalScale
from geomol.metrics.scores import spearman

KERNEL = AnchorKernel(level=1.0, slope=0.3, similarity=0.8, noise=0.3)


def synthetic_series(n: int = 60, seed: int = 0):
    """A congeneric series in two chemotypes (shared bits plus their own): the base model ranks within each
    chemotype but puts chemotype B 2 pK too low, and the whole series 1 pK too low."""
    rng = np.random.default_rng(seed)
    fingerprints = rng.poisson(0.3, (n, 64)).astype(float)
    chemotype = np.arange(n) % 2
    fingerprints[:, :8] += 3  # the common core
    fingerprints[chemotype == 1, 8:16] += 4  # chemotype B's own substructure
    truth = rng.normal(7.0, 0.5, n) + 1.0 * chemotype
    base = truth - 1.0 - 2.0 * chemotype + rng.normal(0, 0.1, n)
    names = [f"lig_{i}" for i in range(n)]
    return names, truth, base, fingerprints


def test_minmax_similarity_is_one_on_itself_symmetric_and_positive_semidefinite():
    rng = np.random.default_rng(1)
    counts = rng.poisson(1.0, (20, 32)).astype(float)
    similarity = minmax_similarity(counts, counts)
    assert np.allclose(np.diag(similarity), 1.0) and np.allclose(similarity, similarity.T)
    assert np.linalg.eigvalsh(similarity).min() > -1e-9
    low = np.minimum(counts[0], counts[1]).sum() / np.maximum(counts[0], counts[1]).sum()
    assert similarity[0, 1] == pytest.approx(low)
    assert minmax_similarity(np.zeros((1, 4)), np.zeros((1, 4)))[0, 0] == 1.0


def test_anchors_move_predictions_towards_the_measured_series():
    names, truth, base, fingerprints = synthetic_series()
    chosen = np.arange(10)  # five of each chemotype measured
    rest = np.arange(10, len(names))
    anchors = Anchors([names[i] for i in chosen], base[chosen], fingerprints[chosen], truth[chosen])
    mean, sd = residual_predictions(KERNEL, anchors, base[rest], fingerprints[rest])
    # the offset is learned, the chemotype B error corrected by similarity, so ranking and error improve
    assert np.abs(mean - truth[rest]).mean() < 0.5 * np.abs(base[rest] - truth[rest]).mean()
    assert spearman(mean, truth[rest]) > spearman(base[rest], truth[rest]) + 0.2
    assert (sd > KERNEL.noise).all() and (sd < np.sqrt(KERNEL.level ** 2 + KERNEL.similarity ** 2 + 1)).all()
    averaged = anchored_average(anchors, base[rest], fingerprints[rest], power=4.0)
    assert spearman(averaged, truth[rest]) > spearman(base[rest], truth[rest]) + 0.2
    # a measured ligand above its prediction pulls up its close analogue, not the other chemotype
    one = Anchors(["lig_1"], base[[1]], fingerprints[[1]], base[[1]] + 2.0)
    near, far = 3, 2  # chemotype B like lig_1, and chemotype A
    moved = residual_predictions(KERNEL, one, base[[near, far]], fingerprints[[near, far]])[0] - base[[near, far]]
    assert moved[0] > moved[1] > 0


def test_no_measured_ligand_is_predicted_from_itself():
    names, truth, base, fingerprints = synthetic_series(20)
    anchors = Anchors(names[:8], base[:8], fingerprints[:8], truth[:8])
    own, _ = residual_predictions(KERNEL, anchors, base[:8], fingerprints[:8], names[:8])
    with_itself, _ = residual_predictions(KERNEL, anchors, base[:8], fingerprints[:8])
    for i in range(8):
        without, _ = residual_predictions(KERNEL, anchors.without(i), base[[i]], fingerprints[[i]])
        assert own[i] == pytest.approx(without[0])
        assert abs(with_itself[i] - truth[i]) < abs(own[i] - truth[i])  # its own value would have helped
    averaged = anchored_average(anchors, base[:8], fingerprints[:8], 2.0, names[:8])
    assert averaged[0] == pytest.approx(anchored_average(anchors.without(0), base[:1], fingerprints[:1], 2.0)[0])


def test_a_series_without_measurements_falls_back_to_the_base_model():
    names, truth, base, fingerprints = synthetic_series(12)
    empty = Anchors([], np.zeros(0), np.zeros((0, fingerprints.shape[1])), np.zeros(0))
    mean, sd = residual_predictions(KERNEL, empty, base, fingerprints)
    assert np.array_equal(mean, base)
    assert np.allclose(sd, np.sqrt(KERNEL.level ** 2 + KERNEL.similarity ** 2 + KERNEL.noise ** 2))
    assert np.array_equal(anchored_average(empty, base, fingerprints), base)
    series = AnchoredSeries(AnchoringSettings(KERNEL), empty)
    assert series.method == "base" and not series.moves_predictions


def test_next_best_orders_by_mean_or_upper_bound_and_skips_the_measured():
    mean, sd = np.array([7.0, 7.5, 6.0, np.nan]), np.array([0.2, 0.1, 2.0, 0.1])
    assert next_best(mean, sd, by="mean").tolist() == [1, 0, 2]
    assert next_best(mean, sd, by="ucb").tolist() == [2, 1, 0]
    assert next_best(mean, sd, by="mean", exclude=[False, True, False, False]).tolist() == [0, 2]
    with pytest.raises(ConfigError):
        next_best(mean, sd, by="best")


def test_settings_choose_a_method_per_budget_and_refuse_bad_values():
    settings = AnchoringSettings(KERNEL, methods={0: "base", 3: "anchored", 10: "residual"},
                                 expected={10: {"spearman": 0.5, "base": 0.4, "targets": 30, "coverage": 0.7}})
    assert [settings.method(k) for k in (0, 1, 3, 9, 10, 40)] == ["base", "anchored", "anchored", "anchored",
                                                                  "residual", "residual"]
    assert "0.50" in settings.expectation(12) and settings.expectation(3) == ""
    assert AnchoringSettings.from_dict(settings.to_dict()) == settings
    with pytest.raises(ConfigError):
        AnchoringSettings(KERNEL, methods={3: "magic"})
    with pytest.raises(ConfigError):
        AnchorKernel(noise=0.0)
    with pytest.raises(ConfigError):
        Anchors(["a", "a"], [1.0, 2.0], np.ones((2, 4)), [1.0, 2.0])


def test_anchors_round_trip_through_a_dict():
    names, truth, base, fingerprints = synthetic_series(10)
    series = AnchoredSeries(AnchoringSettings(KERNEL), Anchors(names[:5], base[:5], fingerprints[:5], truth[:5]))
    again = AnchoredSeries.from_dict(series.to_dict())
    assert again.method == "residual" and again.anchors.names == names[:5]
    assert np.allclose(again.predict(base, fingerprints, names)[0], series.predict(base, fingerprints, names)[0])
    with pytest.raises(ConfigError):
        AnchoredSeries.from_dict({"anchors": [{"name": "x"}], "fingerprint_length": 4})


def test_the_interval_scale_multiplies_the_sd_by_its_budget_and_leaves_the_mean():
    scale = IntervalScale({0: 2.0, 10: 1.0, 20: 0.5})
    assert [scale.factor(k) for k in (0, 5, 10, 15, 20, 40)] == pytest.approx([2.0, 1.5, 1.0, 0.75, 0.5, 0.5])
    assert IntervalScale().factor(7) == 1.0 and IntervalScale.from_dict(scale.to_dict()) == scale
    for bad in ({-1: 1.0}, {3: 0.0}, {3: float("nan")}):
        with pytest.raises(ConfigError):
            IntervalScale(bad)
    names, truth, base, fingerprints = synthetic_series(30)
    anchors = Anchors(names[:10], base[:10], fingerprints[:10], truth[:10])
    plain = residual_predictions(KERNEL, anchors, base, fingerprints, names)
    scaled = residual_predictions(KERNEL, anchors, base, fingerprints, names, interval=scale)
    assert np.allclose(scaled[0], plain[0])
    # the measured ligands are predicted from the 9 others: their factor is the budget 9's
    assert np.allclose(scaled[1][10:], plain[1][10:] * 1.0) and np.allclose(scaled[1][:10], plain[1][:10] * 1.1)
    settings = AnchoringSettings(KERNEL, methods={0: "base", 3: "residual"}, interval=scale)
    assert AnchoringSettings.from_dict(settings.to_dict()) == settings
    series = AnchoredSeries(settings, anchors)
    assert np.allclose(series.predict(base, fingerprints, names)[1], scaled[1])
    assert AnchoringSettings.from_dict({"kernel": KERNEL.to_dict(), "methods": {"0": "base"}}).interval.factor(3) == 1
    with pytest.raises(ConfigError):
        AnchoringSettings.from_dict({"kernel": KERNEL.to_dict(), "methods": {"0": "base"}, "interval_scale": {"x": 1}})
