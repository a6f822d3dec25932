"""The PLB + FEP+ cross-validation tables (:mod:`geomol.evaluation.get_cv`, ``benchmarks/affinity_cv.py``): scores
against the heavy-atom count, summaries that keep their predictions, and the comparison (with the ensemble) the
model card shows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from geomol.evaluation.get_cv import compare, summarise


def _fold_file(out: Path, fold: int, variant: str, rows: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"fold{fold}.json").write_text(json.dumps({
        "fold": fold, "variant": variant, "epochs": 3, "model": {"d_hidden": 8}, "data": {"pocket_cutoff": 10.0},
        "best_val_mean_target_spearman": 0.5, "train_seconds": 36.0, "test": rows}))


def _rows(protein: str, source: str, preds: list[float]) -> list[dict]:
    return [{"id": f"{source}/{protein}/{i}", "protein": protein, "series": protein, "y": float(i),
             "pred": p, "heavy_atoms": 20 + (i % 3)} for i, p in enumerate(preds)]


def test_summaries_keep_predictions_and_compare_adds_the_ensemble(tmp_path):
    right = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    shuffled = [5.0, 0.0, 4.0, 1.0, 3.0, 2.0]
    for variant, preds in (("base", right), ("rank", shuffled)):
        _fold_file(tmp_path / variant, 0, variant, _rows("cdk2", "plb", preds))
        _fold_file(tmp_path / variant, 1, variant, _rows("bace1", "fep", preds[::-1]))
        summarise(tmp_path / variant, tmp_path / f"{variant}.json", min_ligands=5)
    base = json.loads((tmp_path / "base.json").read_text())
    assert len(base["predictions"]) == 12 and base["prediction_fields"][0] == "id"
    assert base["per_target"]["cdk2"]["spearman"] == pytest.approx(1.0)
    assert base["per_target"]["bace1"]["spearman"] == pytest.approx(-1.0)
    assert base["summary"]["mean_target_spearman"] == pytest.approx(0.0)
    assert base["summary"]["plb_mean_target_spearman"] == pytest.approx(1.0)  # cdk2 is the PLB target
    assert base["summary"]["train_hours"] == pytest.approx(0.02)
    table = compare([tmp_path / "base.json", tmp_path / "rank.json"], tmp_path / "variants.json", min_ligands=5)
    names = [row["variant"] for row in table["rows"]]
    assert names == ["base", "rank", "ensemble(base + rank)"]
    # the ensemble scores the mean prediction of the two variants per item
    mean = [(a + b) / 2 for a, b in zip(right, shuffled)]
    _fold_file(tmp_path / "mean", 0, "base", _rows("cdk2", "plb", mean))
    _fold_file(tmp_path / "mean", 1, "base", _rows("bace1", "fep", mean[::-1]))
    expected = summarise(tmp_path / "mean", tmp_path / "m.json", min_ligands=5)["summary"]
    assert table["rows"][2]["mean_target_spearman"] == pytest.approx(expected["mean_target_spearman"])
    assert table["rows"][2]["pooled_rmse"] == pytest.approx(expected["pooled_rmse"])
    assert json.loads((tmp_path / "variants.json").read_text())["rows"][0]["about"]
