"""The corpus cross-validation protocol (:mod:`geomol.evaluation`; ``benchmarks/affinity_corpus_*.py`` are its
command lines) on a small real slice: four plb series (four protein clusters), two leave-cluster-out folds, tiny
model grids."""
from __future__ import annotations

import csv
import json
import math
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.data.paths import shared_data_dir
from geomol.errors import ConfigError, DatasetError
from geomol.evaluation import corpus_cv
from geomol.evaluation.contact_cv import ContactCV, compare_fewshot_settings, contact_fold, corpus_contacts
from geomol.evaluation.corpus_folds import checked_folds, load_items
from geomol.evaluation.fewshot import METHODS, summarise
from geomol.evaluation.get_cv import fewshot_of_folds, predict_corpus_fold, train_corpus_fold
from geomol.evaluation.get_variants import CORPUS_RECIPE, GETFold, corpus_fold_overrides
from geomol.evaluation.predictions import fold_about, read_predictions, training_cpu
from geomol.config_files import read_config
from geomol.training import ligand_baselines
from geomol.training.finetune import FinetuneSettings
from tests.conftest import shared_path

SERIES = ["plb/syk", "plb/hif2a", "plb/pfkfb3", "plb/tnks2"]
TINY_GRIDS = {"rf": [{"n_estimators": 5, "max_features": "sqrt", "min_samples_leaf": 1}],
              "gbm": [{"learning_rate": 0.1, "max_leaf_nodes": 7, "l2_regularization": 1.0, "stages": (5, 10)}],
              "gbm_series": [{"learning_rate": 0.1, "max_leaf_nodes": 7, "min_samples_leaf": 2, "l2_regularization": 1.0,
                              "stages": (5,)}]}


@pytest.fixture(scope="module")
def slice_run(tmp_path_factory):
    shared_path("plb", "syk")
    out = tmp_path_factory.mktemp("corpus_cv")
    slice_args = dict(sources=["plb"], series=SERIES, folds=2, cache_dir=str(out / "cache"))
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the plb folder's own notes (an unmeasured thrombin ligand)
        for kind, grid in TINY_GRIDS.items():
            patch.setitem(ligand_baselines.GRIDS, kind, grid)
        result = corpus_cv.corpus_cross_validation(**slice_args, write_to=out / "preds")
    (out / "cv.json").write_text(corpus_cv.dump(result))
    return result, out, slice_args


@pytest.fixture(scope="module")
def slice_items(slice_run):
    """The slice's items and clusters, read once more for the tests that only score."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_items(shared_data_dir(), ["plb"], SERIES, str(slice_run[1] / "cache"))


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_slice_folds_targets_and_baselines(slice_run):
    result, out, _ = slice_run
    assert json.loads((out / "cv.json").read_text())["provenance"]["command"]
    assert sum(fold["test"] for fold in result["folds"]) == result["items"] and result["clusters"] == 4
    variants = {row["variant"]: row for row in result["variants"]}
    assert list(variants) == ["hac", "rf", "gbm", "gbm_series"]
    hac = variants["hac"]
    assert hac["all"]["targets"] == 4 and hac["expert_pose"] == hac["all"]  # plb only: every target is expert-pose
    assert hac["all"]["spearman_with_hac"] == pytest.approx(1.0) and hac["all"]["beats_hac_fraction"] == 0.0
    table = result["per_target"]
    assert sorted(row[0] for row in table["rows"]) == sorted(SERIES)
    fold_of = {row[0]: row[2] for row in table["rows"]}
    assert set(fold_of.values()) == {0, 1}
    # every item's out-of-fold prediction carries its target's test fold
    predictions = _rows(out / "preds" / "rf.csv")
    assert len(predictions) == result["items"]
    assert all(int(row["fold"]) == fold_of["/".join(row["id"].split("/")[:2])] for row in predictions)
    assert [c["fold"] for c in result["chosen_hyperparameters"]["gbm"]] == [0, 1]
    # the within-series model is scored like the others, from its series-centred features
    series_rows = _rows(out / "preds" / "gbm_series.csv")
    assert len(series_rows) == result["items"] and all(math.isfinite(float(r["prediction"])) for r in series_rows)


def test_given_predictions_are_scored_with_the_same_protocol(slice_run, slice_items, monkeypatch):
    _, out, slice_args = slice_run
    folds = {row["id"]: row["fold"] for row in _rows(out / "preds" / "hac.csv")}
    items = slice_items[0]
    monkeypatch.setattr(corpus_cv, "load_items", lambda *args: slice_items)
    perfect = out / "perfect.csv"
    perfect.write_text("id,prediction,fold\n" + "".join(f"{i.id},{i.label},{folds[i.id]}\n" for i in items))
    result = corpus_cv.corpus_cross_validation(**slice_args, baselines=["hac"], predictions={"measured": perfect})
    measured = result["variants"][1]
    assert measured["variant"] == "measured" and measured["items_predicted"] == len(items)
    assert measured["all"]["spearman"] == pytest.approx(1.0) and measured["all"]["beats_hac_fraction"] == 1.0
    assert measured["cpu_seconds"] is None


def test_ensembles_average_members_standardised_within_targets(slice_run, slice_items, monkeypatch):
    _, out, slice_args = slice_run
    items = slice_items[0]
    monkeypatch.setattr(corpus_cv, "load_items", lambda *args: slice_items)
    shifted = out / "shifted.csv"  # the measured pK plus a large per-target offset: the same order in every target
    shifted.write_text("id,prediction\n" + "".join(f"{i.id},{i.label + 100 * len(i.series)}\n" for i in items))
    result = corpus_cv.corpus_cross_validation(**slice_args, baselines=["hac"], predictions={"measured": shifted},
                                               ensembles={"twice": ["hac", "hac"], "mix": ["hac", "measured"]})
    rows = {row["variant"]: row["all"] for row in result["variants"]}
    assert rows["twice"]["spearman"] == pytest.approx(rows["hac"]["spearman"])
    assert rows["hac"]["spearman"] < rows["mix"]["spearman"] < rows["measured"]["spearman"] == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="no variant"):
        corpus_cv.corpus_cross_validation(**slice_args, baselines=["hac"], ensembles={"bad": ["hac", "nothing"]})
    keys = ["a", "a", "a", "b", "b"]
    combined = corpus_cv.target_ensemble([np.array([1.0, 2.0, 3.0, 7.0, 7.0]), np.array([10.0, 30.0, 20.0, 1.0, 2.0])], keys)
    z = np.sqrt(1.5)  # z-scores of 1, 2, 3 (population spread)
    assert combined[:3] == pytest.approx([-z, z / 2, z / 2])  # (-z - z) / 2, (0 + z) / 2, (z + 0) / 2
    assert combined[3:] == pytest.approx([-0.5, 0.5])  # a constant member counts 0


def test_reference_is_scored_on_each_variants_own_targets(slice_run, slice_items, monkeypatch):
    _, out, slice_args = slice_run
    folds = {row["id"]: int(row["fold"]) for row in _rows(out / "preds" / "hac.csv")}
    monkeypatch.setattr(corpus_cv, "load_items", lambda *args: slice_items)
    one_fold = out / "one_fold.csv"  # the measured pK, for the items of test fold 0 only
    one_fold.write_text("id,prediction\n" + "".join(f"{i.id},{i.label}\n" for i in slice_items[0] if folds[i.id] == 0))
    result = corpus_cv.corpus_cross_validation(**slice_args, baselines=["hac"], predictions={"fold0": one_fold},
                                               reference="hac")
    rows = {row["variant"]: row["all"] for row in result["variants"]}
    fields = result["per_target"]["fields"]
    fold0_hac = [r[fields.index("hac_spearman")] for r in result["per_target"]["rows"] if r[fields.index("fold")] == 0]
    assert rows["fold0"]["targets"] == len(fold0_hac) < rows["hac"]["targets"]
    assert rows["fold0"]["reference_spearman"] == pytest.approx(np.mean(fold0_hac), abs=1e-4)  # the table rounds
    assert rows["hac"]["reference_spearman"] == pytest.approx(rows["hac"]["spearman"])
    with pytest.raises(ConfigError, match="no such variant"):
        corpus_cv.corpus_cross_validation(**slice_args, baselines=["hac"], reference="nothing")


def test_only_folds_scores_every_variant_on_those_test_folds(slice_run, slice_items, monkeypatch):
    _, out, slice_args = slice_run
    folds = {row["id"]: int(row["fold"]) for row in _rows(out / "preds" / "hac.csv")}
    monkeypatch.setattr(corpus_cv, "load_items", lambda *args: slice_items)
    result = corpus_cv.corpus_cross_validation(**slice_args, baselines=["hac", "rf"], only_folds=[0])
    fields = result["per_target"]["fields"]
    fold0_hac = [r[fields.index("hac_spearman")] for r in result["per_target"]["rows"] if r[fields.index("fold")] == 0]
    hac, rf = result["variants"]
    assert hac["items_predicted"] == rf["items_predicted"] == sum(k == 0 for k in folds.values()) < len(folds)
    assert [c["fold"] for c in result["chosen_hyperparameters"]["rf"]] == [0]  # fitted for fold 0 alone
    assert hac["all"]["targets"] == len(fold0_hac) and hac["all"]["spearman"] == pytest.approx(np.mean(fold0_hac), abs=1e-3)
    assert "test folds [0] only" in result["description"]


def test_predictions_from_another_split_or_corpus_are_refused(slice_run, slice_items):
    out, (items, clusters) = slice_run[1], slice_items
    _, fold_of = checked_folds(items, clusters, 2, 0)
    wrong_fold = out / "wrong_fold.csv"
    wrong_fold.write_text(f"id,prediction,fold\n{items[0].id},5.0,{1 - fold_of[0]}\n")
    with pytest.raises(DatasetError, match="wrong_fold.csv.*test fold"):
        read_predictions(wrong_fold, items, fold_of)
    unknown = out / "unknown.csv"
    unknown.write_text("id,prediction\nplb/cdk2/0:lig_1,5.0\n")
    with pytest.raises(DatasetError, match="not a corpus item"):
        read_predictions(unknown, items, fold_of)
    partial = out / "partial.csv"
    partial.write_text(f"id,prediction\n{items[0].id},7.5\n")
    pred = read_predictions(partial, items, fold_of)
    assert pred[0] == 7.5 and np.isnan(pred[1:]).all()


def _long_run_predictions_match(out: Path, slice_run, tmp_path: Path) -> None:
    """``predict_corpus_fold`` (``benchmarks/get_convergence.py predict``), given a fold's config and best checkpoint,
    writes the same test predictions as the fold's training did (the path a long run's checkpoint takes into the
    table)."""
    fold = GETFold(0, str(out), folds=2, epochs=1, series=SERIES, valid_fraction=0.5,
                   cache_dir=str(slice_run[1] / "cache"))
    config = read_config(CORPUS_RECIPE)
    config["data"]["init_args"].update(corpus_fold_overrides(fold)["data"]["init_args"])
    (tmp_path / "fold0.yaml").write_text(yaml.safe_dump(config))
    record = predict_corpus_fold(tmp_path / "fold0.yaml", out / "fold0_checkpoint" / "best.ckpt", tmp_path / "long")
    assert record["fold"] == 0 and record["test_items"] == len((out / "fold0.csv").read_text().splitlines()) - 1
    assert (tmp_path / "long" / "fold0.csv").read_text() == (out / "fold0.csv").read_text()
    assert fold_about(tmp_path / "long") == f"GET fold0: {record['about']} ({record['epochs']} epoch(s))"


def test_get_folds_train_on_the_protocol_folds_and_enter_the_table(slice_run, slice_items, tmp_path):
    """benchmarks/affinity_corpus_get.py on the slice: each fold's best checkpoint predicts exactly that fold's
    test items, and the folder of fold CSVs is read as one out-of-fold prediction set."""
    items, clusters = slice_items
    _, fold_of = checked_folds(items, clusters, 2, 0)
    out = tmp_path / "get"
    for fold in (0, 1):
        result = train_corpus_fold(GETFold(fold, str(out), folds=2, epochs=1, series=SERIES, valid_fraction=0.5,
                                           val_check_interval=1.0, cache_dir=str(slice_run[1] / "cache")))
        assert result["test_items"] == int((fold_of == fold).sum()) and result["steps"] > 0
        assert json.loads((out / f"fold{fold}.json").read_text())["provenance"]["command"]
    pred = read_predictions(out, items, fold_of)  # refuses any item predicted outside its test fold
    assert np.isfinite(pred).all() and np.std(pred) > 0
    _long_run_predictions_match(out, slice_run, tmp_path)

    records = [json.loads((out / f"fold{fold}.json").read_text()) for fold in (0, 1)]
    assert training_cpu(out) == pytest.approx(sum(r["train_cpu_seconds"] for r in records))
    assert fold_about(out).startswith("GET base:")

    # k measured ligands of each held-out target, fold 0's model
    few = fewshot_of_folds(out, [0], n_folds=2, valid_fraction=0.5, series=SERIES, ks=[3], draws=2,
                           settings=FinetuneSettings(steps=5), cache_dir=str(slice_run[1] / "cache"))
    scored = {row["target"] for row in few["rows"]}
    test_series = {items[i].series for i in np.flatnonzero(fold_of == 0)}
    assert scored and scored <= test_series and all(row["k"] == 3 for row in few["rows"])
    assert all(-1 <= row[m] <= 1 for row in few["rows"] for m in METHODS)
    assert few["summary"][0]["n_targets"] == len(few["rows"])


def _contact_folds(cache: str, cv: ContactCV, out, series=SERIES) -> list[dict]:
    """:func:`~geomol.evaluation.contact_cv.contact_fold` on both folds of the slice (validation slice 0.5)."""
    corpus = corpus_contacts(cv.recipe, sources=["plb"], series=series, cache_dir=cache, n_folds=2, valid_fraction=0.5,
                             bonds=cv.message_steps > 0)
    return [contact_fold(k, corpus, cv, out) for k in (0, 1)]


def test_contact_scorer_folds_enter_the_table(slice_run, slice_items, tmp_path):
    """The contact scorer's folds on the slice: every fold's seeds are chosen on its validation slice and predict
    exactly that fold's test items; the folder is read as one out-of-fold prediction set."""
    items, clusters = slice_items
    _, fold_of = checked_folds(items, clusters, 2, 0)
    out = tmp_path / "contact"
    records = _contact_folds(str(slice_run[1] / "cache"), ContactCV(seeds=2, epochs=3, folds=2), out)
    assert [r["fold"] for r in records] == [0, 1]
    for record in records:
        assert record["test_items"] == int((fold_of == record["fold"]).sum()) and record["model"] == "contact scorer"
        assert len(record["chosen_epochs"]) == 2 and all(0 <= e < 3 for e in record["chosen_epochs"])
        assert record["split_sizes"]["valid"] > 0 and json.loads((out / f"fold{record['fold']}.json").read_text())
    pred = read_predictions(out, items, fold_of)  # refuses any item predicted outside its test fold
    assert np.isfinite(pred).all() and np.std(pred) > 0
    assert fold_about(out).startswith("contact scorer contact: per-atom contact MLP")
    assert training_cpu(out) == pytest.approx(sum(r["train_cpu_seconds"] for r in records))


def test_contact_scorer_with_roles_and_few_shot_rows(slice_run, slice_items, tmp_path):
    """The interaction-role columns widen the input; few-shot rows come from each fold's expert-pose test targets,
    fine-tuned as ``geomol finetune`` does, and summarised per k."""
    items, clusters = slice_items
    _, fold_of = checked_folds(items, clusters, 2, 0)
    out = tmp_path / "contact_roles"
    cv = ContactCV(ContactRecipe(roles=True), seeds=1, epochs=2, folds=2, train_sources=["plb"], fewshot=[3],
                   fewshot_draws=2)
    records = _contact_folds(str(slice_run[1] / "cache"), cv, out)
    from geomol.models.contact_scorer import WITH_CHEMISTRY

    assert all(r["atom_features"] == WITH_CHEMISTRY and r["chemistry"] for r in records)
    assert fold_about(out).startswith("contact scorer contact: per-atom contact MLP with interaction roles")
    rows = [row for r in records for row in r["fewshot_rows"]]
    test_series = {items[i].series: int(fold_of[i]) for i in range(len(items))}
    assert rows and all(test_series[row["target"]] == row["fold"] and row["k"] == 3 for row in rows)
    assert all(-1 <= row[m] <= 1 for row in rows for m in METHODS)
    summary = summarise(rows, [3])
    assert summary[0]["n_targets"] == len(rows) and summary[0]["targets"] == "expert_pose"


def test_contact_scorer_variants_of_the_issue_table(slice_run, slice_items, tmp_path):
    """Radial shells widen the rows by the receptor classes' shells, no descriptors drops the descriptor term,
    pooled adds the non-additive term, compare_within protein batches by protein cluster, the listwise loss."""
    from geomol.data.chemistry.contact_features import RADIAL_CONTACT_FEATURES
    from geomol.models.contact_scorer import WITH_CHEMISTRY

    items, clusters = slice_items
    _, fold_of = checked_folds(items, clusters, 2, 0)
    out = tmp_path / "contact_variants"
    cv = ContactCV(ContactRecipe(roles=True, radial=True), seeds=1, epochs=2, folds=2, descriptors=False, pooled=4,
                   compare_within="protein", loss="listwise")
    records = _contact_folds(str(slice_run[1] / "cache"), cv, out)
    assert all(r["atom_features"] == WITH_CHEMISTRY + len(RADIAL_CONTACT_FEATURES) for r in records)
    assert all(r["radial"] and not r["descriptors"] and r["pooled"] == 4 and r["compare_within"] == "protein"
               for r in records)
    pred = read_predictions(out, items, fold_of)
    assert np.isfinite(pred).all() and np.std(pred) > 0
    assert fold_about(out).startswith("contact scorer contact: per-atom contact MLP with interaction roles and "
                                         "receptor classes by distance shell, listwise loss within protein")
    # the shells' counts are log1p'd here (the rows are wider than the scorer's own log columns)
    data = corpus_contacts(ContactRecipe(roles=True, radial=True), sources=["plb"], series=SERIES,
                           cache_dir=str(slice_run[1] / "cache"), n_folds=2, valid_fraction=0.5).data
    assert float(data.atoms[:, WITH_CHEMISTRY:].max()) < np.log1p(200) and float(data.atoms.min()) >= 0


def test_contact_scorer_on_rigidly_moved_poses(slice_run, slice_items, tmp_path):
    """Rigid moves: the ligand's features averaged over its pose and K rigid moves (pose views 'smooth'), or the
    moved poses read as augmentation and averaged over in predictions ('augment'); recorded in the fold records."""
    items, clusters = slice_items
    _, fold_of = checked_folds(items, clusters, 2, 0)
    cache = str(slice_run[1] / "cache")
    for use in ("smooth", "augment"):
        out = tmp_path / use
        recipe = ContactRecipe(moves=2, shift=0.4, turn=10.0, pose_views=use)
        records = _contact_folds(cache, ContactCV(recipe, seeds=1, epochs=2, folds=2), out)
        assert all(r["moves"] == {"count": 2, "shift": 0.4, "turn": 10.0, "use": use} for r in records)
        pred = read_predictions(out, items, fold_of)
        assert np.isfinite(pred).all() and np.std(pred) > 0
        assert "4 rigid moves of the ligand (0.4 Å, 10°" in fold_about(out)
    read = dict(sources=["plb"], series=SERIES[:2], cache_dir=cache, n_folds=2, valid_fraction=0.5)
    moved = ContactRecipe(moves=2, shift=0.4, turn=10.0)
    smooth = corpus_contacts(moved, **read)
    views = corpus_contacts(replace(moved, pose_views="augment"), **read)
    plain = corpus_contacts(ContactRecipe(), **read)
    assert len(smooth.views) == 0 and len(views.views) == 4 and torch.equal(views.data.atoms, plain.data.atoms)
    torch.testing.assert_close(smooth.data.atoms, (plain.data.atoms + sum(view.atoms for view in views.views)) / 5)
    assert not torch.equal(views.views[0].atoms, plain.data.atoms)


def test_boosted_contact_model_folds_enter_the_table(slice_run, slice_items, tmp_path, monkeypatch):
    """Model gbm_series: one boosted model per fold on the ligands' summed contact features, chosen on validation,
    predicting exactly that fold's test items."""
    monkeypatch.setitem(ligand_baselines.GRIDS, "gbm_series", TINY_GRIDS["gbm_series"])
    items, clusters = slice_items
    _, fold_of = checked_folds(items, clusters, 2, 0)
    out = tmp_path / "contact_gbm"
    cv = ContactCV(ContactRecipe(roles=True), model="gbm_series", variant="contact_gbm", folds=2)
    records = _contact_folds(str(slice_run[1] / "cache"), cv, out)
    assert all(r["contact_model"] == "gbm_series" and r["seeds"] == 0 and r["chosen"]["max_iter"] == 5 for r in records)
    pred = read_predictions(out, items, fold_of)
    assert np.isfinite(pred).all() and np.std(pred) > 0
    assert fold_about(out).startswith("contact scorer contact_gbm: gradient boosting within series")
    with pytest.raises(ConfigError, match="few-shot"):
        ContactCV(model="gbm_series", fewshot=[3])


def test_fewshot_settings_are_compared_on_validation_targets(slice_run, tmp_path):
    """Few-shot settings: every setting is scored on the same draws of validation targets."""
    contacts = corpus_contacts(sources=["plb"], series=SERIES, cache_dir=str(slice_run[1] / "cache"), n_folds=2,
                               valid_fraction=0.5)
    result = compare_fewshot_settings(contacts, [FinetuneSettings(anchor=0.0), FinetuneSettings(anchor=1000.0)], [3],
                                      draws=1, min_ligands=10)
    rows = {row["anchor"]: row for row in result}
    assert set(rows) == {0.0, 1000.0} and all(row["targets"] > 0 and row["k"] == 3 for row in rows.values())
    assert rows[0.0]["targets"] == rows[1000.0]["targets"] and all(np.isfinite(r["mean_gain"]) for r in rows.values())
    assert rows[0.0]["mean_gain"] != rows[1000.0]["mean_gain"]  # the pull changes what k ligands can teach


def test_bond_context_appends_the_mean_of_bonded_neighbours_logged_rows():
    """--bond-context rows: the atom's own row with the count columns log1p'd, then the mean of its bonded
    neighbours' (logged) rows; an atom without bonds gets zeros."""
    from geomol.data.chemistry.contact_features import COUNT_FEATURES
    from geomol.data.chemistry.contact_recipe import with_bond_context
    from geomol.models.contact_scorer import WITH_CHEMISTRY as width

    rows = np.zeros((4, width))
    count, flag = COUNT_FEATURES[0], 0  # a receptor-count column, and the one-hot element column of carbon
    rows[:, count] = [0.0, 1.0, 3.0, 7.0]
    rows[:3, flag] = 1.0
    out = with_bond_context(rows, np.array([[0, 1], [1, 2]]))  # chain 0–1–2, atom 3 alone
    assert out.shape == (4, 2 * width)
    assert np.allclose(out[:, count], np.log1p([0.0, 1.0, 3.0, 7.0])) and np.allclose(out[:, flag], [1, 1, 1, 0])
    assert np.allclose(out[:, width + count], [np.log1p(1.0), (np.log1p(0.0) + np.log1p(3.0)) / 2, np.log1p(1.0), 0.0])
    assert np.allclose(out[:, width + flag], [1, 1, 1, 0])


def test_train_affinity_builds_the_shipped_kind_of_model_from_a_config(slice_run, tmp_path):
    """``geomol train-affinity``: the contact-corpus recipe on the slice, one calibrated member per fold, its
    contact recipe, complex recipe and applicability domain saved; loaded and used like the shipped model."""
    import yaml

    import geomol
    from geomol.cli import main
    from geomol.data import read_ligands, read_structure
    from tests.conftest import REPO

    config = yaml.safe_load((REPO / "models" / "contact-corpus.yaml").read_text())
    config["data"].update(sources=["plb"], series=SERIES, cache_dir=str(slice_run[1] / "cache"))
    config["ensemble"].update(folds=2, valid_fraction=0.5)
    config["member"]["hidden"] = 8
    config["fit"] = {"loss": "ranking", "epochs": 2, "seed": 0}
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train-affinity", "--config", str(path), "--out", str(tmp_path / "small"), "--threads", "1"]) == 0
    model = geomol.load_model(tmp_path / "small")
    assert model.name == "contact-corpus" and len(model.members) == 2 and model.recipe.pocket_cutoff == 10.0
    assert model.arguments["features"] == ContactRecipe(roles=True).to_dict() and model.arguments["hidden"] == 8
    assert [o["fold"] for o in model.origins] == [0, 1] and model.domain.to_dict()["ligand_heavy_atoms"]
    assert [round(float(m.scale), 4) for m in model.members] == [o["scale"] for o in model.origins]  # calibrated
    receptor = read_structure(REPO / "data" / "example" / "tnks2_protein.pdb")
    graphs = [model.recipe.build(receptor, mol) for mol in read_ligands(REPO / "data" / "example" / "tnks2_ligands.sdf")]
    pk, spread = model.predict(graphs)  # two members of a tiny fit: finite, not meaningful
    assert bool(torch.isfinite(pk).all()) and bool((spread > 0).all())
    path.write_text(yaml.safe_dump({**config, "fit": {"optimiser": "sgd"}}))
    with pytest.raises(ConfigError, match="unknown key"):
        from geomol.commands.train_affinity import build

        build(path)
