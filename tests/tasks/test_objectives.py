"""Auxiliary objectives are components chosen in the config: every cross-validation variant is a config
override of the shipped recipe, a new loss needs no change to the task, and checkpoints stay plain."""
from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from geomol.tasks import AffinityModule
from geomol.config_files import merge_config
from geomol.tasks.runs import build_from_config
from geomol.errors import ConfigError
from geomol.tasks.objectives import (CentredLoss, DecoyLoss, DenoisingPretraining, LossTerm, RankingLoss,
                                     RelativeEdgeLoss, describe, register_loss_term)
from tests.conftest import REPO, shared_path


@register_loss_term
class ConstantLoss(LossTerm):
    """A loss defined outside geomol (here: in a test), added by class path only (registered, so that its
    checkpoints load)."""

    def value(self, model, batch, pred):
        return pred.sum() * 0 + 1.0


def test_merge_config_merges_mappings_and_replaces_the_rest():
    base = {"trainer": {"max_epochs": 12, "callbacks": [1, 2]}, "model": {"init_args": {"hidden": 32}}}
    merged = merge_config(base, {"trainer": {"callbacks": [3]}, "model": {"init_args": {"num_layers": 1}}})
    assert merged == {"trainer": {"max_epochs": 12, "callbacks": [3]}, "model": {"init_args": {"hidden": 32,
                                                                                               "num_layers": 1}}}
    assert base["trainer"]["callbacks"] == [1, 2]  # the base is not changed


@pytest.mark.filterwarnings("ignore")
def test_every_cv_variant_is_a_config_of_the_shipped_recipe(tmp_path, monkeypatch):
    from geomol.evaluation.get_variants import PLB_RECIPE, VARIANTS, GETFold, plb_fold_overrides

    monkeypatch.setenv("GEOMOL_SHARED_DATA", str(shared_path()))
    expected = {"rank": (RankingLoss,), "rank_series": (RankingLoss,), "rbfe": (RelativeEdgeLoss,), "pretrain": (),
                "pretrain_corpus": (), "decoys": (DecoyLoss,), "physics_decoys": (DecoyLoss,), "physics_size_decoys": (DecoyLoss,),
                "centred": (CentredLoss,), "pretrain_centred": (CentredLoss,)}
    for name, variant in VARIANTS.items():
        overrides = plb_fold_overrides(GETFold(1, str(tmp_path / name), variant=name, cache_dir=str(tmp_path / "cache"),
                                               fragment_vocab=str(tmp_path / "v.json")))
        if name == "fragments":  # needs a vocabulary file; the others build as they are
            overrides["data"]["init_args"].pop("fragments")
        cli = build_from_config(PLB_RECIPE, overrides)
        assert isinstance(cli.model, AffinityModule) and cli.trainer.max_epochs == 12
        assert cli.datamodule.split_args["fold"] == 1 and cli.trainer.checkpoint_callback.monitor.endswith("spearman")
        assert tuple(type(t) for t in cli.model.loss_terms) == expected.get(name, ())
        assert isinstance(cli.model.pretraining_stage, DenoisingPretraining) == name.startswith("pretrain")
        for key, value in variant["data"].items():
            assert getattr(cli.datamodule, key) == value


@pytest.mark.filterwarnings("ignore")
def test_a_loss_added_by_class_path_trains_and_checkpoints_stay_plain(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the CLI saves its config.yaml in the working directory without a logger
    data = {"class_path": "geomol.tasks.PLBDataModule",
            "init_args": {"root": str(shared_path("plb")), "targets": ["cdk2", "cmet", "ptp1b"], "split": "held_out",
                          "test_proteins": ["cmet"], "valid_proteins": ["ptp1b"], "max_blocks": 300,
                          "cache_dir": str(tmp_path / "cache"), "preprocess_workers": 0}}
    model = {"init_args": {"hidden": 8, "radial_dim": 8, "num_rbf": 8, "num_layers": 1, "loss_terms": [
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
    from geomol.data.complexes.recipe import ComplexRecipe
    from geomol.models.readouts import GraphReadout
    from tests.affinity_fixtures import TINY_GET

    graph_readout = "geomol.models.readouts.GraphReadout"
    module = AffinityModule(**TINY_GET, num_block_types=150, readout=graph_readout)
    module.recipe = ComplexRecipe()  # what a data module gives at set-up: checkpoints record it
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


def test_centred_loss_ignores_each_groups_offset_and_singletons():
    from geomol.training.losses import centred_loss

    y = torch.tensor([5.0, 6.0, 7.0, 3.0, 4.0, 9.0])
    groups = ["a", "a", "a", "b", "b", "c"]
    shifted = y + torch.tensor([2.0, 2.0, 2.0, -1.0, -1.0, 5.0])  # right within groups, wrong offsets
    assert centred_loss(shifted, y, groups).item() == pytest.approx(0.0, abs=1e-12)
    wrong_order = torch.tensor([7.0, 6.0, 5.0, 3.0, 4.0, 0.0])  # group a reversed; b right; c alone
    # a: residuals 2, 0, -2 (mean 0) → squares 4, 0, 4; b: 0, 0; c left out → 8 / 5
    assert centred_loss(wrong_order, y, groups).item() == pytest.approx(8 / 5)
    assert centred_loss(y, y, ["a", "b", "c", "d", "e", "f"]).item() == 0.0  # no group of two: no signal


def test_decoy_hinge_loss_wants_each_decoy_a_margin_below_its_complex():
    from geomol.training.losses import decoy_hinge_loss

    pred = torch.tensor([7.0, 5.0])
    decoys, origin = torch.tensor([5.5, 4.9, 2.0]), torch.tensor([0, 1, 1])
    # margins: 7 − 5.5 = 1.5 (satisfied), 5 − 4.9 = 0.1 (0.9 short), 5 − 2 = 3 (satisfied)
    assert decoy_hinge_loss(pred, decoys, origin, margin=1.0).item() == pytest.approx(0.9 / 3)


def test_decoy_loss_term_scores_decoys_with_the_model_and_trains_it():
    from torch_geometric.data import Batch

    from geomol.data import complex_from_files
    from geomol.data.io import read_ligands
    from geomol.models.get import GETAffinity
    from geomol.tasks.objectives import DecoyLoss

    example = REPO / "data" / "example"
    graphs = [complex_from_files(example / "tnks2_protein.pdb", mol, y=6.0, pocket_cutoff=6.0)
              for mol in read_ligands(example / "tnks2_ligands.sdf")[:3]]
    batch = Batch.from_data_list(graphs)
    torch.manual_seed(0)
    model = GETAffinity(hidden=16, radial_dim=8, num_rbf=8, edge_embedding_dim=8, num_layers=1, num_heads=2)  # the official read-out
    term = DecoyLoss(weight=1.0, margin=1.0, fraction=1.0, kinds=["shift"])
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-2)
    losses = []
    for _ in range(15):
        optimiser.zero_grad()
        loss = term(model, batch, model(batch))
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[0] > 0 and losses[-1] < 0.5 * losses[0]
    with pytest.raises(ConfigError, match="decoy kinds"):
        DecoyLoss(kinds=["jiggle"])
    assert describe(DecoyLoss(margin=2.0))["init_args"]["margin"] == 2.0


def _shell(marker):
    return {"class_path": "subprocess.run", "init_args": {"args": f"touch {marker}", "shell": True}}


@pytest.mark.parametrize("field, record", [
    ("loss_terms", lambda marker: [_shell(marker)]),
    ("loss_terms", lambda marker: [{"class_path": "os.system", "init_args": {"command": f"touch {marker}"}}]),
    ("pretraining", _shell),
    ("pretraining", lambda marker: {"class_path": "geomol.tasks.objectives.RankingLoss", "init_args": {}}),
])
def test_a_checkpoint_naming_any_other_callable_is_refused_and_nothing_is_called(tmp_path, field, record):
    from tests.affinity_fixtures import TINY_GET

    module = AffinityModule(**TINY_GET, num_block_types=150, loss_terms=[RankingLoss(group_by="series")])
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, accelerator="cpu")
    trainer.strategy.connect(module)
    trainer.save_checkpoint(tmp_path / "m.ckpt")
    checkpoint = torch.load(tmp_path / "m.ckpt", weights_only=True)
    marker = tmp_path / "called"
    checkpoint["hyper_parameters"][field] = record(marker)
    torch.save(checkpoint, tmp_path / "bad.ckpt")
    assert AffinityModule.load_from_checkpoint(tmp_path / "m.ckpt").loss_terms[0].group_by == "series"
    with pytest.raises(ConfigError, match="is not registered"):
        AffinityModule.load_from_checkpoint(tmp_path / "bad.ckpt")  # the usual Lightning way, weights_only unset
    assert not marker.exists()
