"""Every shipped model's manifest carries its whole input recipe, and loading never fills one in.

An affinity manifest states how its complexes were built (``preprocessing``: pocket cutoff, hydrogens, fragments)
and how its members read them (the member kind's :attr:`~geomol.models.affinity_member.AffinityMember.recipe_keys`
in ``hyperparameters``: the contact scorer's features, GET's read-out, the trees' input columns); a trajectory
manifest states its data protocol. A manifest with any of these left out is refused with a message that says what
is missing, naming the model directory.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import geomol
from geomol.data.complexes.recipe import RECIPE_FIELDS
from geomol.errors import ModelLoadError
from geomol.inference.model_files import list_shipped_models
from geomol.models.affinity_member import member_kind

SHIPPED = {entry["name"]: entry for entry in list_shipped_models()}
AFFINITY = sorted(name for name, entry in SHIPPED.items() if entry["task"] == "affinity")
pytestmark = pytest.mark.skipif(not AFFINITY, reason="no shipped models")


def _manifest(name: str) -> dict:
    return json.loads((Path(SHIPPED[name]["path"]) / "manifest.json").read_text())


def test_every_shipped_manifest_states_its_recipe():
    assert {"contact-corpus", "get-plb"} <= set(AFFINITY)
    for name, entry in SHIPPED.items():
        manifest = _manifest(name)
        if entry["task"] == "affinity":
            assert set(RECIPE_FIELDS) <= set(manifest["preprocessing"]), name
            kind = member_kind(manifest["architecture"])
            assert kind.recipe_keys and set(kind.recipe_keys) <= set(manifest["hyperparameters"]), name
            # what is recorded is what the loaded members use: nothing is left to a default
            model = geomol.load_model(name)
            assert model.arguments == manifest["hyperparameters"], name
        else:
            assert manifest["preprocessing"].get("kind") and manifest["preprocessing"].get("target_offsets"), name


def _copy_without(name: str, tmp_path, section: str, key: str):
    folder = tmp_path / f"{name}-{section}-{key}"
    shutil.copytree(SHIPPED[name]["path"], folder)
    manifest = _manifest(name)
    del manifest[section][key]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.mark.parametrize("name", AFFINITY)
def test_a_manifest_without_part_of_its_recipe_is_refused(name, tmp_path):
    manifest = _manifest(name)
    missing = [("preprocessing", key) for key in RECIPE_FIELDS]
    missing += [("hyperparameters", key) for key in member_kind(manifest["architecture"]).recipe_keys]
    for section, key in missing:
        folder = _copy_without(name, tmp_path, section, key)
        with pytest.raises(ModelLoadError, match="records no") as raised:
            geomol.load_model(folder)
        assert str(folder) in str(raised.value) and (key in str(raised.value) or section == "hyperparameters")


@pytest.mark.parametrize("name", AFFINITY)
def test_a_manifest_with_the_old_hyperparameter_names_loads_with_a_deprecation_warning(name, tmp_path):
    """Before one vocabulary GET wrote d_hidden, n_layers, n_head, ... and the contact scorer n_atom_features,
    n_descriptors: such a model still loads (a FutureWarning names the old names) and predicts the same."""
    from geomol.models import contact_scorer, get

    manifest = _manifest(name)
    renamed_by = {"GETAffinity": get.RENAMED, "ContactScorer": contact_scorer.RENAMED}.get(manifest["architecture"])
    if renamed_by is None:
        pytest.skip(f"{manifest['architecture']} came after the vocabulary change: it has no old names")
    old_names = {new: old for old, new in renamed_by.items()}
    renamed = {old_names.get(key, key): value for key, value in manifest["hyperparameters"].items()}
    assert renamed != manifest["hyperparameters"]
    folder = tmp_path / name
    shutil.copytree(SHIPPED[name]["path"], folder)
    (folder / "manifest.json").write_text(json.dumps({**manifest, "hyperparameters": renamed}))
    with pytest.warns(FutureWarning, match="deprecated and read as") as caught:
        old = geomol.load_model(folder)
    assert str(folder) in str(caught[0].message)
    assert old.arguments == manifest["hyperparameters"]  # recorded again with the new names when saved
    receptor = Path(__file__).parents[2] / "data" / "example" / "tnks2_protein.pdb"
    ligands = receptor.with_name("tnks2_ligands.sdf")
    now = geomol.load_model(name)
    assert [r.pK for r in geomol.predict_affinity(receptor, ligands, model=old)] == \
        [r.pK for r in geomol.predict_affinity(receptor, ligands, model=now)]
