"""``geomol train-affinity`` builds GET ensembles as it builds every shipped affinity model: from one config format,
on complexes of the data layer (no Lightning data module), members trained by a plain loop that continues an
interrupted member exactly (:mod:`geomol.training.get_members`)."""
from __future__ import annotations

import json

import pytest
import torch
import yaml

import geomol
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.datasets.sources import BenchmarkSource
from geomol.errors import ConfigError
from geomol.models.get import GETAffinity, GETConfig
from geomol.training.get_members import GETFit, fit_get_member
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO, shared_path

TINY = {"hidden": 16, "radial_dim": 8, "num_rbf": 8, "edge_embedding_dim": 8, "num_layers": 1, "num_heads": 2}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def dataset(cache):
    source = BenchmarkSource(ComplexRecipe(), plb_root=str(shared_path("plb")), targets=["tnks2"],
                             cache_dir=str(cache))
    return source.make_dataset()


def _config(tmp_path, cache, **changes) -> str:
    """The shipped get-plb config on one PLB target with a tiny GET, two members of two epochs."""
    config = yaml.safe_load((REPO / "models" / "get-plb.yaml").read_text())
    config["member"] = {"kind": "GETAffinity", **TINY}
    config["data"] = {"source": "benchmark", "plb_root": str(shared_path("plb")), "targets": ["tnks2"],
                      "cache_dir": str(cache)}
    config.update(ensemble={"seeds": [0, 1]}, fit={**config["fit"], "epochs": 2}, domain={"spread_every": 1})
    config.update(changes)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_train_affinity_builds_a_get_ensemble_from_the_shipped_format(tmp_path, cache, dataset):
    from geomol.cli import main

    out = tmp_path / "tiny-get"
    assert main(["train-affinity", "--config", _config(tmp_path, cache), "--out", str(out), "--runs",
                 str(tmp_path / "runs"), "--threads", "1"]) == 0
    model = geomol.load_model(out)
    assert model.architecture == "GETAffinity" and len(model.members) == 2 and model.name == "get-plb"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["hyperparameters"] == {**GETConfig(**TINY).to_dict(), "num_block_types": 150}
    assert manifest["preprocessing"] == ComplexRecipe(pocket_cutoff=10.0).to_dict()
    assert [member["source"]["seed"] for member in manifest["members"]] == [0, 1]
    assert all(member["source"]["steps"] > 0 for member in manifest["members"])
    assert model.domain.to_dict()["ligand_heavy_atoms"]
    pk, spread = model.predict([dataset[i] for i in range(3)])
    assert bool(torch.isfinite(pk).all()) and bool((spread > 0).all())  # two seeds: two different members
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["member_0.state.pt", "member_1.state.pt"]


def test_an_interrupted_member_continues_to_the_same_weights(dataset, tmp_path):
    config, fit = GETConfig(**TINY, dropout=0.3), GETFit(epochs=2)
    whole, _ = fit_get_member(dataset, config, fit, seed=3, log=lambda line: None)

    class Interrupted(Exception):
        pass

    def stop_after_the_first_epoch(line):
        if "epoch 1/" in line:
            raise Interrupted

    state = tmp_path / "member.state.pt"
    with pytest.raises(Interrupted):
        fit_get_member(dataset, config, fit, seed=3, state_path=state, log=stop_after_the_first_epoch)
    assert torch.load(state, weights_only=True)["epoch"] == 1
    lines = []
    resumed, origin = fit_get_member(dataset, config, fit, seed=3, state_path=state, log=lines.append)
    assert "continuing after epoch 1" in lines[0] and origin["steps"] > 0
    torch.manual_seed(3)
    initial = GETAffinity(config).state_dict()  # the member before training (its seed draws the same weights)
    assert any(not torch.equal(value, initial[name]) for name, value in whole.state_dict().items())
    for name, value in whole.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[name]), name


def test_config_errors_name_the_config(tmp_path, cache):
    from geomol.commands.train_affinity import build

    bad = _config(tmp_path, cache, member={"kind": "GETAffinity", "d_model": 16})
    with pytest.raises(ConfigError, match=r"member: unknown key\(s\) \['d_model'\]") as raised:
        build(bad)
    assert raised.value.source.endswith("tiny.yaml")
    with pytest.raises(ConfigError, match="no trainer for LigandTrees"):
        build(_config(tmp_path, cache, member={"kind": "LigandTrees"}))
    with pytest.raises(ConfigError, match="'kind' is one of"):
        build(_config(tmp_path, cache, member={"kind": "Transformer"}))
    with pytest.raises(ConfigError, match="unknown option"):
        build(_config(tmp_path, cache, data={"source": "benchmark", "plb": "x"}))
    with pytest.raises(ConfigError, match="format of before one config format"):
        build(_config(tmp_path, cache, members={"model": {"hidden": 8}}))
