"""The nucleic-acid cross-validation on a few real complexes: every variant on the same held-out complexes, fold
files that resume, the pooled figures, tree models chosen inside the training clusters and shipped as members that
predict what the cross-validation predicted."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from geomol.errors import ConfigError
from geomol.evaluation.nucleic_cv import ensemble_predictions, run_variant, summarise, variant_predictions
from geomol.evaluation.nucleic_models import fold_trees, inner_folds
from geomol.evaluation.nucleic_set import nucleic_set
from geomol.metrics.scores import spearman
from geomol.training.contact_trees import common_members, tree_member
from geomol.data.chemistry.contact_recipe import ContactRecipe
from tests.data.test_nucleic_affinity import _copy_subset

IDS = ["2B57", "2G9C", "2XNW", "4LVW", "4LVX", "1ARJ", "1UTS", "3FU2", "3Q50", "4NYC", "4NYD", "2YDH", "2YGH", "1AJU",
       "1Y27", "454D"]  # 8 clusters with tier A; 1AJU and 1Y27 are tier B
TREES = {"features": {"roles": True, "nucleic": True}, "algorithm": "et", "tier_b": "auto"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nucleic_cv")
    (folder / "data").mkdir()
    _copy_subset(folder / "data", IDS)
    return nucleic_set(folder / "data", cache_dir=folder / "cache", n_folds=2, valid_fraction=0.2)


def test_variants_are_scored_on_the_same_held_out_complexes(data, tmp_path, monkeypatch):
    import geomol.training.contact_trees as contact_trees

    monkeypatch.setitem(contact_trees.TREE_GRIDS, "et", [{"n_estimators": 20, "min_samples_leaf": 2,
                                                          "max_features": 0.5}])
    hac = run_variant(data, "hac", "hac", {}, tmp_path)
    run_variant(data, "trees", "trees", TREES, tmp_path, folds=[0])
    with pytest.raises(ConfigError, match="not scored on the same complexes"):
        summarise(tmp_path, ["hac", "trees"])
    trees = run_variant(data, "trees", "trees", TREES, tmp_path)  # resumes: fold 0 is not fitted again
    assert [f["fold"] for f in trees["folds"]] == [0, 1]
    with pytest.raises(ConfigError, match="other settings"):
        run_variant(data, "trees", "trees", {**TREES, "algorithm": "rf"}, tmp_path)
    rows = {r["variant"]: r for r in summarise(tmp_path, ["hac", "trees"], {"both": ["hac", "trees"]})}
    tier_a = [i for i, t in enumerate(data.tiers) if t == "A"]
    assert rows["hac"]["complexes"] == len(tier_a) == 14 and rows["hac"]["tier_b_complexes"] == 2
    assert rows["hac"]["spearman"] == pytest.approx(spearman(data.heavy[tier_a], data.label[tier_a]), abs=1e-4)
    assert rows["hac"]["gain_over_hac"] == 0 and rows["trees"]["selection_spearman"] is not None
    items = variant_predictions(hac)
    assert {v["fold"] for v in items.values()} == {0, 1}
    mean = ensemble_predictions([items, variant_predictions(trees)])
    some = next(iter(mean))
    assert mean[some]["prediction"] == pytest.approx((items[some]["prediction"] +
                                                      variant_predictions(trees)[some]["prediction"]) / 2)
    assert json.loads((tmp_path / "trees.json").read_text())["folds"][1]["chosen"]["tier_b"] in (0.0, 0.3, 1.0)


def test_inner_folds_stay_inside_the_training_clusters(data):
    fold = data.folds[0]
    train = fold["train"] + fold["valid"]
    held = {data.clusters[i] for i in data.held_out(fold)}
    for fit, scored in inner_folds(data, train, seed=0):
        assert set(fit) | set(scored) <= set(train)
        assert not {data.clusters[i] for i in fit} & {data.clusters[i] for i in scored}
        assert not ({data.clusters[i] for i in fit} | {data.clusters[i] for i in scored}) & held
        assert all(data.tiers[i] == "A" for i in scored)


def test_a_shipped_tree_member_predicts_what_the_fold_model_predicted(data, monkeypatch):
    import geomol.training.contact_trees as contact_trees

    monkeypatch.setitem(contact_trees.TREE_GRIDS, "et", [{"n_estimators": 30, "min_samples_leaf": 2,
                                                          "max_features": 0.5}])
    members, expected = [], []
    for k, fold in enumerate(data.folds):
        rows, choice = fold_trees(data, fold, k, TREES)
        members.append(tree_member(choice, ContactRecipe(roles=True, nucleic=True)))
        expected.append(choice.model.predict(rows[data.held_out(fold)]))
    padded = common_members(members)
    assert len({m.feature.shape for m in padded}) == 1
    for member, fold, want in zip(padded, data.folds, expected):
        graphs = [data.graphs[i] for i in data.held_out(fold)]
        with torch.inference_mode():
            got = member(member.inputs(graphs)).numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_train_affinity_builds_the_fold_members_from_the_one_config_format(tmp_path, monkeypatch):
    import yaml

    import geomol
    import geomol.training.contact_trees as contact_trees
    from geomol.commands.train_affinity import build

    monkeypatch.setitem(contact_trees.TREE_GRIDS, "rf", [{"n_estimators": 25, "min_samples_leaf": 2,
                                                          "max_features": 0.5}])
    root = tmp_path / "data"
    root.mkdir()
    _copy_subset(root, IDS)
    config = {"name": "na-tiny", "member": {"kind": "ContactTrees", "model": "rf",
                                            "features": {"roles": True, "nucleic": True}},
              "recipe": {"pocket_cutoff": 10.0}, "data": {"source": "nucleic", "root": str(root)},
              "ensemble": {"folds": 2, "valid_fraction": 0.2}, "fit": {"tier_b": "auto"}}
    path = tmp_path / "na-tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    model, _ = build(path, cache_dir=str(tmp_path / "cache"))
    assert model.architecture == "ContactTrees" and len(model.members) == 2
    assert model.arguments["features"]["nucleic"] and model.domain.receptor_kinds == ("DNA", "RNA")
    assert [o["fold"] for o in model.origins] == [0, 1]
    loaded = geomol.load_model(model.save(tmp_path / "model"))
    folder = root / "2B57"
    [record] = geomol.predict_affinity(folder / "receptor.pdb", folder / "ligand.sdf", model=loaded)
    assert record.ok and not any(f.code == "receptor_kind_unseen" for f in record.findings)
    path.write_text(yaml.safe_dump({**config, "fit": {"tier_b": "auto", "epochs": 3}}))
    with pytest.raises(ConfigError, match="fit: unknown key"):
        build(path, cache_dir=str(tmp_path / "cache"))
