"""The protein–protein cross-validation table: baselines are fitted on the training folds only, and scored per
category and PPAB difficulty class on the complexes every row predicted."""
from __future__ import annotations

import math

import numpy as np
import pytest

from geomol.data.chemistry.interface_features import CONTACT_FEATURES
from geomol.data.datasets.protein_affinity import read_protein_affinity
from geomol.evaluation import protein_affinity_cv as cv
from tests.conftest import shared_path


@pytest.fixture(scope="module")
def complexes():
    return read_protein_affinity(shared_path("protein_affinity"))


def _features(complexes, signal):
    """Descriptors that all equal ``signal(complex)``, and a PRODIGY record predicting the measured ΔG."""
    rows = {}
    for c in complexes:
        value = signal(c)
        rows[c.id] = {"interface_residues": value, "buried_sasa": value, "contacts": value,
                      **{name: value for name in CONTACT_FEATURES},
                      "prodigy": {"dG_kcal_mol": c.dg_kcal_mol, **{k: value for k in cv.PRODIGY_REFIT}}}
    return rows


def test_baselines_fit_the_training_folds_and_predict_every_complex_once(complexes, monkeypatch):
    monkeypatch.setattr(cv, "prodigy_version", lambda: "test")
    predictions = cv.baseline_predictions(complexes, _features(complexes, lambda c: 2.0 * c.dg_kcal_mol + 1.0))
    by_id = {c.id: c for c in complexes}
    for name, rows in predictions.items():
        assert sorted(r["id"] for r in rows) == sorted(by_id), name
        clusters_by_fold = {}
        for row in rows:
            clusters_by_fold.setdefault(row["fold"], set()).add(row["cluster"])
        folds = list(clusters_by_fold.values())
        assert all(not a & b for i, a in enumerate(folds) for b in folds[i + 1:])  # a cluster in one test fold
    exact = cv.score_rows(predictions["interface residues (8 Å)"])  # a linear feature is recovered exactly
    assert exact["all"]["pearson"] == pytest.approx(1.0) and exact["all"]["rmse"] == pytest.approx(0.0, abs=1e-6)
    assert cv.score_rows(predictions["PRODIGY (prodigy-prot test)"])["all"]["rmse"] == 0.0  # as the package predicts


def test_category_mean_never_sees_the_test_fold(complexes):
    folds = cv.cluster_folds([c.cluster for c in complexes], cv.N_FOLDS, seed=0)
    test = [complexes[i] for i in folds[0]["test"]]
    train = [c for i, c in enumerate(complexes) if i not in set(folds[0]["test"])]
    predicted = cv._category_mean(train, test)
    tcr = [p for p, c in zip(predicted, test) if c.category == "TCR-pMHC"]
    expected = np.mean([c.dg_kcal_mol for c in train if c.category == "TCR-pMHC"])
    assert tcr and np.allclose(tcr, expected)
    assert not np.isclose(expected, np.mean([c.dg_kcal_mol for c in test if c.category == "TCR-pMHC"]))


def test_scores_per_category_and_difficulty():
    rows = [{"id": str(i), "category": cat, "difficulty": diff, "dG": dg, "pred_dG": pred}
            for i, (cat, diff, dg, pred) in enumerate([
                ("enzyme-inhibitor", "rigid", -12.0, -11.0), ("enzyme-inhibitor", "", -14.0, -13.5),
                ("other", "medium", -8.0, -10.0), ("other", "", -10.0, -9.0), ("TCR-pMHC", "", -7.0, -7.2)])]
    scores = cv.score_rows(rows)
    assert scores["all"]["n"] == 5 and scores["category"]["enzyme-inhibitor"]["pearson"] == pytest.approx(1.0)
    assert scores["category"]["other"]["pearson"] == pytest.approx(-1.0)
    assert scores["category"]["TCR-pMHC"]["n"] == 1 and math.isnan(scores["category"]["TCR-pMHC"]["pearson"])
    assert scores["difficulty"]["rigid"]["n"] == 1 and "flexible" not in scores["difficulty"]
    assert scores["all"]["rmse"] == pytest.approx(np.sqrt(np.mean([1, 0.25, 4, 1, 0.04])), abs=1e-4)
