"""Auxiliary objectives are components chosen in the config: every cross-validation variant is a config
override of the shipped recipe, a new loss needs no change to the task, and checkpoints stay plain."""
from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from geomol.tasks import AffinityModule
from geomol.tasks.cli import build_from_config, merge_config
from geomol.tasks.objectives import DenoisingPretraining, LossTerm, RankingLoss, RelativeEdgeLoss
from tests.conftest import REPO, shared_path
from tests.test_affinity_cv_tables import cv  # noqa: F401 (fixture: the benchmark script as a module)


class ConstantLoss(LossTerm):
    """A loss defined outside geomol (here: in a test), added by class path only."""

    def value(self, model, batch, pred):
        return pred.sum() * 0 + 1.0


def test_merge_config_merges_mappings_and_replaces_the_rest():
    base = {"trainer": {"max_epochs": 12, "callbacks": [1, 2]}, "model": {"init_args": {"d_hidden": 32}}}
    merged = merge_config(base, {"trainer": {"callbacks": [3]}, "model": {"init_args": {"n_layers": 1}}})
    assert merged == {"trainer": {"max_epochs": 12, "callbacks": [3]}, "model": {"init_args": {"d_hidden": 32,
                                                                                               "n_layers": 1}}}
    assert base["trainer"]["callbacks"] == [1, 2]  # the base is not changed


@pytest.mark.filterwarnings("ignore")
def test_every_cv_variant_is_a_config_of_the_shipped_recipe(cv, tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMOL_SHARED_DATA", str(shared_path()))
    expected = {"rank": (RankingLoss,), "rank_series": (RankingLoss,), "rbfe": (RelativeEdgeLoss,), "pretrain": ()}
    for name, variant in cv.VARIANTS.items():
        args = cv.build_args(["train", "--fold", "1", "--variant", name, "--out-dir", str(tmp_path / name),
                              "--cache-dir", str(tmp_path / "cache"), "--fragment-vocab", str(tmp_path / "v.json")])
        overrides = cv.fold_overrides(args, variant)
        if name == "fragments":  # needs a vocabulary file; the others build as they are
            overrides["data"]["init_args"].pop("fragments")
        cli = build_from_config(cv.RECIPE, overrides)
        assert isinstance(cli.model, AffinityModule) and cli.trainer.max_epochs == 12
        assert cli.datamodule.split_args["fold"] == 1 and cli.trainer.checkpoint_callback.monitor.endswith("spearman")
        assert tuple(type(t) for t in cli.model.loss_terms) == expected.get(name, ())
        assert isinstance(cli.model.pretraining_stage, DenoisingPretraining) == (name == "pretrain")
        for key, value in variant["data"].items():
            assert getattr(cli.datamodule, key) == value


@pytest.mark.filterwarnings("ignore")
def test_a_loss_added_by_class_path_trains_and_checkpoints_stay_plain(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the CLI saves its config.yaml in the working directory without a logger
    data = {"class_path": "geomol.tasks.PLBDataModule",
            "init_args": {"root": str(shared_path("plb")), "targets": ["cdk2", "cmet", "ptp1b"], "split": "held_out",
                          "test_proteins": ["cmet"], "valid_proteins": ["ptp1b"], "max_blocks": 300,
                          "cache_dir": str(tmp_path / "cache"), "preprocess_workers": 0}}
    model = {"init_args": {"d_hidden": 8, "d_radial": 8, "n_rbf": 8, "n_layers": 1, "loss_terms": [
        {"class_path": "tests.tasks.test_objectives.ConstantLoss", "init_args": {"weight": 2.0}}]}}
    trainer = {"max_steps": 1, "limit_val_batches": 0, "logger": False, "enable_progress_bar": False,
               "callbacks": [], "enable_model_summary": False, "enable_checkpointing": False}
    cli = build_from_config(REPO / "configs" / "get_plb.yaml", {"model": model, "data": data, "trainer": trainer})
    batch = next(iter(cli.datamodule.train_dataloader()))
    cli.model.train()
    with_term, _, pred = cli.model.compute(batch)
    assert torch.isclose(with_term, torch.nn.functional.mse_loss(pred, batch.y) + 2.0)
    cli.trainer.fit(cli.model, cli.datamodule)
    cli.trainer.save_checkpoint(tmp_path / "m.ckpt")
    saved = torch.load(tmp_path / "m.ckpt", weights_only=True)  # components are recorded as plain dicts
    assert saved["hyper_parameters"]["loss_terms"] == [
        {"class_path": "tests.tasks.test_objectives.ConstantLoss", "init_args": {"weight": 2.0}}]
    assert saved["geomol_preprocessing"]["pocket_cutoff"] == 10.0
    again = AffinityModule.load_from_checkpoint(tmp_path / "m.ckpt", weights_only=True)
    assert [type(t).__name__ for t in again.loss_terms] == ["ConstantLoss"] and again.loss_terms[0].weight == 2.0
    assert again.recipe == cli.datamodule.recipe


def test_a_readout_chosen_by_class_path_travels_to_the_loaded_model(tmp_path):
    import geomol
    from geomol.errors import ModelLoadError
    from geomol.models.readouts import GraphReadout
    from tests.affinity_fixtures import TINY_GET

    graph_readout = "geomol.models.readouts.GraphReadout"
    module = AffinityModule(**TINY_GET, n_block_types=150, readout=graph_readout)
    assert isinstance(module.model.readout, GraphReadout)
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, accelerator="cpu")
    trainer.strategy.connect(module)
    trainer.save_checkpoint(tmp_path / "graph.ckpt")
    loaded = geomol.load_model(tmp_path / "graph.ckpt")
    assert loaded.arguments["readout"] == graph_readout and isinstance(loaded.members[0].readout, GraphReadout)
    receptor = REPO / "data" / "example" / "tnks2_protein.pdb"
    ligands = geomol.data.read_ligands(REPO / "data" / "example" / "tnks2_ligands.sdf")[:2]
    graphs = [loaded.recipe.build(loaded.recipe.read_receptor(receptor), mol) for mol in ligands]
    module.eval()
    with torch.no_grad():
        assert torch.equal(loaded.predict(graphs)[0], module(graphs).float())
    # a model file can only name registered read-outs: nothing is imported from what it says
    data = torch.load(tmp_path / "graph.ckpt", weights_only=True)
    data["hyper_parameters"]["readout"] = "os.system"
    torch.save(data, tmp_path / "evil.ckpt")
    with pytest.raises(ModelLoadError, match="unknown read-out 'os.system'"):
        geomol.load_model(tmp_path / "evil.ckpt")
