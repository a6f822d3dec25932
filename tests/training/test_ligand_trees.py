"""The ligand-only baselines as shipped members: a fitted forest or boosting model becomes arrays
(:class:`~geomol.models.ligand_trees.LigandTrees`) that predict exactly as scikit-learn does, save and load with
``weights_only=True``, predict through the same API as the other members and fine-tune their level."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import geomol
from geomol.data import complex_from_structure, read_ligands, read_structure
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.errors import ConfigError
from geomol.inference.affinity_model import AffinityModel
from geomol.models.ligand_trees import LIGAND_FEATURES, LigandTrees, graph_ligand_inputs
from geomol.training.finetune import FinetuneSettings, finetune_model
from geomol.training.ligand_baselines import ligand_trees, select_ligand_model
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"
GRIDS = {"rf": [{"n_estimators": 12, "max_features": "sqrt", "min_samples_leaf": 2}],
         "gbm": [{"learning_rate": 0.1, "max_leaf_nodes": 7, "l2_regularization": 1.0, "stages": (10, 20)}]}


def _features(n: int, seed: int) -> np.ndarray:
    """Rows like a ligand's: small integer counts (ties at split points) and real-valued descriptors."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(0.3, size=(n, LIGAND_FEATURES - 11)).astype(np.float64)
    return np.concatenate([counts, rng.normal(300.0, 80.0, size=(n, 11))], axis=1)


@pytest.fixture(scope="module")
def fitted():
    X = _features(150, 0)
    y = 0.8 * X[:, 3] + 0.01 * X[:, -5] + np.random.default_rng(1).normal(0, 0.3, len(X))
    keys = [f"s{i % 10}" for i in range(len(X))]
    return {kind: select_ligand_model(kind, X, y, np.arange(100), np.arange(100, 150), keys[100:], min_ligands=3,
                                      grid=GRIDS[kind]) for kind in GRIDS}


@pytest.fixture(scope="module")
def graphs():
    receptor = read_structure(EXAMPLE / "tnks2_protein.pdb")
    return [complex_from_structure(receptor, mol) for mol in read_ligands(EXAMPLE / "tnks2_ligands.sdf")]


@pytest.mark.parametrize("kind", sorted(GRIDS))
def test_the_arrays_predict_as_scikit_learn(fitted, kind):
    member = ligand_trees(fitted[kind])
    X = _features(80, 2)
    np.testing.assert_allclose(member(torch.from_numpy(X)).numpy(), fitted[kind].model.predict(X), rtol=0,
                               atol=1e-10)
    assert member.depth > 1 and LigandTrees.from_config(member.to_config()).to_config() == member.to_config()


@pytest.mark.parametrize("kind", sorted(GRIDS))
def test_shipped_loaded_and_fine_tuned_like_any_member(fitted, graphs, kind, tmp_path):
    members = [ligand_trees(fitted[kind]), ligand_trees(fitted[kind])]
    with torch.no_grad():
        members[1].offset += 0.5  # a spread between members
    model = AffinityModel(members, members[0].to_config(), ComplexRecipe(), name=f"ligand-{kind}")
    out = model.save(tmp_path / kind)
    loaded = geomol.load_model(out)
    assert loaded.architecture == "LigandTrees" and loaded.arguments["model"] == kind
    expected = fitted[kind].model.predict(graph_ligand_inputs(graphs).numpy()) + 0.25
    np.testing.assert_allclose(loaded.predict(graphs)[0].numpy(), expected, rtol=1e-6)
    records = geomol.predict_affinity(EXAMPLE / "tnks2_protein.pdb", EXAMPLE / "tnks2_ligands.sdf", model=loaded)
    np.testing.assert_allclose([r.pK for r in records], expected, rtol=1e-6)
    measured = [6.0, 7.0, 8.0]
    tuned, report = finetune_model(loaded, graphs[:3], measured, ["a", "b", "c"], FinetuneSettings(steps=5))
    before, after = loaded.members[0].state_dict(), tuned.members[0].state_dict()
    assert {k for k in before if not torch.equal(before[k], after[k])} == {"offset"}  # trees stay, the level moves
    assert np.mean(report.after) == pytest.approx(np.mean(measured), abs=1e-6)


def test_series_model_and_a_ligand_without_chemistry_are_refused(fitted, graphs):
    X = _features(60, 3)
    y = X[:, 0] + np.random.default_rng(4).normal(0, 0.1, len(X))
    groups = [f"s{i % 4}" for i in range(len(X))]
    series = select_ligand_model("gbm_series", X, y, np.arange(40), np.arange(40, 60), groups[40:], min_ligands=3,
                                 grid=[{"learning_rate": 0.1, "max_leaf_nodes": 7, "stages": (5,)}], groups=groups)
    with pytest.raises(ConfigError, match="whole series"):
        ligand_trees(series)
    bare = graphs[0].clone()
    bare.ligand_descriptors = torch.full_like(bare.ligand_descriptors, float("nan"))
    with pytest.raises(ConfigError, match="lig.sdf: .*chemistry"):
        ligand_trees(fitted["rf"]).check_complex(bare, "lig.sdf")
