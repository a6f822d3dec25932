"""geomol.api.list_models: the shipped models load_model finds by name, from manifests only."""
from __future__ import annotations

import json
import shutil

from geomol.api import list_models
from tests.conftest import REPO


def test_lists_the_shipped_affinity_models_with_the_default_alias():
    models = {m["name"]: m for m in list_models("affinity")}
    assert {"contact-corpus", "get-plb"} <= set(models)
    assert models["contact-corpus"]["aliases"] == ["default"]
    assert models["get-plb"]["members"] == len(json.loads((REPO / "models/get-plb/manifest.json").read_text())["members"])
    assert all(m["task"] == "affinity" for m in models.values())
    assert "egno-fkbp12" in {m["name"] for m in list_models("dynamics")}


def test_an_earlier_folder_of_the_search_path_wins_and_a_broken_manifest_is_left_out(tmp_path, monkeypatch):
    shutil.copytree(REPO / "models/get-plb", tmp_path / "get-plb", ignore=shutil.ignore_patterns("*.pt"))
    manifest = json.loads((tmp_path / "get-plb/manifest.json").read_text())
    (tmp_path / "get-plb/manifest.json").write_text(json.dumps({**manifest, "description": "my copy"}))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken/manifest.json").write_text("{not json")
    monkeypatch.setenv("GEOMOL_MODELS", str(tmp_path))
    models = {m["name"]: m for m in list_models()}
    assert models["get-plb"]["description"] == "my copy"
    assert "broken" not in models
