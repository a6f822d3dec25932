"""Per-target ranking metrics (geomol.metrics.targets) and Kendall's τ-b, on hand-computed cases."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from geomol.errors import ConfigError
from geomol.metrics.scores import kendall_tau
from geomol.metrics.targets import (
    evaluate_targets,
    score_target,
    summarise_targets,
    target_keys,
    target_members,
)


def test_kendall_tau_counts_concordant_pairs():
    # 6 pairs, one discordant (2 vs 3): (5 - 1) / 6
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_kendall_tau_b_corrects_for_ties():
    # pairs (0,1) tied in pred, (0,2) and (1,2) concordant: 2 / sqrt(2 untied-in-pred * 3 untied-in-target)
    assert kendall_tau([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(kendall_tau([5, 5, 5], [1, 2, 3]))
    assert math.isnan(kendall_tau([1], [1]))


def test_target_members_keep_targets_with_enough_included_items():
    keys = ["a", "b", "a", "a", "b", "c"]
    assert target_members(keys, min_ligands=2) == {"a": [0, 2, 3], "b": [1, 4]}
    # b loses an item to the mask and falls under the threshold
    assert target_members(keys, min_ligands=2, include=[1, 1, 1, 0, 0, 1]) == {"a": [0, 2]}


def test_target_keys_by_series_or_cluster():
    items = [SimpleNamespace(series="plb/cdk2"), SimpleNamespace(series="uni_fep/x")]
    assert target_keys(items, ["c1", "c2"]) == ["plb/cdk2", "uni_fep/x"]
    assert target_keys(items, ["c1", "c1"], by="cluster") == ["cluster/c1", "cluster/c1"]
    with pytest.raises(ConfigError, match="targets are one of"):
        target_keys(items, ["c1", "c2"], by="protein")


def test_score_target_against_the_heavy_atom_count():
    scores = score_target([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [40, 30, 20, 10])
    assert scores["spearman"] == pytest.approx(1.0) and scores["kendall"] == pytest.approx(1.0)
    assert scores["hac_spearman"] == pytest.approx(-1.0)
    assert scores["spearman_with_hac"] == pytest.approx(-1.0)
    assert scores["beats_hac"] == 1.0 and scores["n"] == 4
    # equal to the heavy-atom count is not beating it
    same = score_target([10, 20, 30], [1.0, 3.0, 2.0], [10, 20, 30])
    assert same["spearman"] == pytest.approx(0.5) and same["beats_hac"] == 0.0
    assert same["spearman_with_hac"] == pytest.approx(1.0)
    assert math.isnan(score_target([1, 1, 1], [1.0, 2.0, 3.0], [1, 2, 3])["beats_hac"])


def test_summaries_average_over_targets_not_items():
    per_target = {"big": {"n": 100, "spearman": 0.8, "pearson": 0.7, "kendall": 0.6, "hac_spearman": 0.5,
                          "spearman_with_hac": 0.2, "beats_hac": 1.0},
                  "small": {"n": 10, "spearman": 0.2, "pearson": 0.1, "kendall": 0.0, "hac_spearman": 0.4,
                            "spearman_with_hac": float("nan"), "beats_hac": 0.0}}
    summary = summarise_targets(per_target)
    assert summary["targets"] == 2 and summary["items"] == 110
    assert summary["spearman"] == pytest.approx(0.5) and summary["pearson"] == pytest.approx(0.4)
    assert summary["spearman_with_hac"] == pytest.approx(0.2)  # NaN skipped
    assert summary["beats_hac_fraction"] == pytest.approx(0.5)
    assert summarise_targets(per_target, ["small", "absent"])["spearman"] == pytest.approx(0.2)


def test_evaluate_targets_splits_expert_pose_from_all_sources():
    keys = ["plb/a"] * 3 + ["uni_fep/b"] * 3
    sources = ["plb"] * 3 + ["uni_fep"] * 3
    label = [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    pred = [1.0, 2.0, 3.0, 3.0, 2.0, 1.0]  # right on plb/a, reversed on uni_fep/b
    heavy = [1, 1, 2, 1, 1, 2]
    result = evaluate_targets(pred, label, heavy, keys, sources, min_ligands=3)
    assert result["expert_pose"]["summary"]["targets"] == 1
    assert result["expert_pose"]["summary"]["spearman"] == pytest.approx(1.0)
    assert result["all"]["summary"]["spearman"] == pytest.approx(0.0)
    assert result["all"]["summary"]["beats_hac_fraction"] == pytest.approx(0.5)
    masked = evaluate_targets(pred, label, heavy, keys, sources, include=[1, 1, 0, 1, 1, 1], min_ligands=3)
    assert masked["expert_pose"]["summary"]["targets"] == 0 and list(masked["all"]["per_target"]) == ["uni_fep/b"]


def test_kendall_tau_matches_scipy_on_tied_data():
    from scipy.stats import kendalltau

    pred = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    target = [2, 7, 1, 8, 2, 8, 1, 8, 2, 8]
    assert kendall_tau(pred, target) == pytest.approx(kendalltau(pred, target).statistic)
