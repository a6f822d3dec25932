"""The auxiliary objectives of the affinity task: relative free energies on the perturbation edges
(multi-task with the RBFE graph) and ligand-coordinate denoising (pre-training without labels)."""
from __future__ import annotations

import csv
import math
from types import SimpleNamespace

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from geomol.models.get import GETAffinity, as_batch
from geomol.tasks import AffinityModule, BenchmarkAffinityDataModule
from geomol.data.blocks import ligand_atom_mask
from geomol.errors import ConfigError
from geomol.tasks.objectives import DenoisingPretraining, RankingLoss, RelativeEdgeLoss
from geomol.training.losses import denoising_loss, relative_edge_loss
from tests.conftest import shared_path

SERIES = ["charge_annhil/jnk1", "charge_annhil/egfr", "charge_annhil/jak1", "charge_annhil/itk"]


def test_relative_edge_loss_counts_the_edges_inside_the_batch_only():
    pred = torch.tensor([5.0, 6.0, 7.0, 4.0], requires_grad=True)
    series, ligands = ["s", "s", "s", "t"], ["a", "b", "c", "a"]
    edges = {"s": [("a", "b", 1.5), ("b", "c", 1.0), ("a", "z", 3.0)], "t": [("a", "b", 2.0)]}
    loss = relative_edge_loss(pred, series, ligands, edges)
    assert torch.isclose(loss, torch.tensor(((1.0 - 1.5) ** 2 + 0.0) / 2))  # (a,z) and t's edge: an end missing
    loss.backward()
    assert pred.grad[3] == 0
    # only differences matter: a per-series offset changes nothing
    shifted = pred.detach() + torch.tensor([2.0, 2.0, 2.0, -7.0])
    assert torch.isclose(relative_edge_loss(shifted, series, ligands, edges), loss.detach())
    assert relative_edge_loss(pred, ["u"] * 4, ligands, edges) == 0


def test_ranking_by_series_ignores_pairs_across_series_of_one_protein():
    batch = SimpleNamespace(y=torch.tensor([5.0, 6.0, 9.0, 4.0]), protein=["p"] * 4, series=["s", "s", "t", "t"])
    pred = torch.tensor([1.0, 3.0, 0.0, -2.0])  # right order inside s and inside t, wrong across them
    by_series, by_protein = RankingLoss(group_by="series"), RankingLoss()
    assert by_series.init_args == {"weight": 1.0, "group_by": "series"}
    expected = torch.nn.functional.softplus(torch.tensor([-2.0, -2.0])).mean()  # (b over a), (c over d)
    assert torch.isclose(by_series(None, batch, pred), expected)
    assert by_protein(None, batch, pred) > by_series(None, batch, pred)  # c's and b's cross-series pairs count
    with pytest.raises(ConfigError, match="group_by"):
        RankingLoss(group_by="cluster")


@pytest.fixture(scope="module")
def fep_data(tmp_path_factory):
    data = BenchmarkAffinityDataModule(plb_root=None, fep_root=str(shared_path("fep_benchmark")), series=SERIES,
                                       split="held_out", test_proteins=["itk"], valid_proteins=["jak1"],
                                       max_blocks=400, group_batches=True, preprocess_workers=0,
                                       cache_dir=str(tmp_path_factory.mktemp("cache")))
    data.prepare_data()
    return data


@pytest.mark.filterwarnings("ignore")
def test_relative_edges_come_from_the_measured_perturbation_graphs(fep_data):
    edges = fep_data.relative_edges()
    assert set(edges) == set(SERIES)
    dataset = fep_data.load_dataset()
    pk = {(dataset[i].series, dataset[i].ligand): float(dataset[i].y) for i in range(len(dataset))}
    checked = 0
    for series, pairs in edges.items():
        for a, b, delta in pairs:
            if (series, a) in pk and (series, b) in pk:  # experimental edges = differences of the labels
                assert math.isclose(delta, pk[(series, b)] - pk[(series, a)], abs_tol=0.02)
                checked += 1
    assert checked >= 10


@pytest.mark.filterwarnings("ignore")
def test_denoising_loss_is_learnable_and_uses_no_labels(fep_data):
    torch.manual_seed(0)
    dataset = fep_data.load_dataset()
    graphs = [dataset[i] for i in range(4)]
    for graph in graphs:
        graph.y = torch.full_like(graph.y, math.nan)  # labels are not needed
    batch = as_batch(graphs)
    model = GETAffinity(hidden=16, radial_dim=8, num_rbf=8, num_layers=1, num_block_types=fep_data.num_block_types)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        torch.manual_seed(1)  # the same noise every step: the loss must go down
        loss = denoising_loss(model, batch, sigma=1.0)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss))
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.8 * losses[0]


@pytest.mark.filterwarnings("ignore")
def test_denoising_loss_is_one_for_a_model_that_returns_its_input(fep_data):
    dataset = fep_data.load_dataset()
    batch = as_batch([dataset[i] for i in range(8)])

    class ReturnsInput:
        @staticmethod
        def embed(graphs):
            return SimpleNamespace(X=graphs.X)

    torch.manual_seed(0)
    for sigma in (0.5, 2.0):
        assert denoising_loss(ReturnsInput(), batch, sigma) == pytest.approx(1.0, abs=0.1)


@pytest.mark.filterwarnings("ignore")
def test_pretraining_epochs_are_never_selected_and_edges_train(fep_data, tmp_path):
    pl.seed_everything(0)
    module = AffinityModule(hidden=16, radial_dim=8, num_rbf=8, num_layers=1, loss_terms=[RelativeEdgeLoss(1.0)],
                            pretraining=DenoisingPretraining(epochs=1))
    checkpoint = ModelCheckpoint(dirpath=tmp_path, monitor="val/mean_target_spearman", mode="max", save_top_k=1)
    trainer = pl.Trainer(max_epochs=2, limit_train_batches=2, logger=CSVLogger(tmp_path, name="log"),
                         callbacks=[checkpoint], enable_progress_bar=False, enable_model_summary=False,
                         use_distributed_sampler=False)
    trainer.fit(module, fep_data)
    edges = module.loss_terms[0].edges
    assert edges and set(edges) <= set(SERIES)
    rows = [r for r in csv.DictReader(open(next(tmp_path.glob("log/*/metrics.csv"))))
            if r.get("val/mean_target_spearman")]
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    assert math.isnan(float(rows[0]["val/mean_target_spearman"]))  # denoising epoch: read-out untrained
    assert not math.isnan(float(rows[1]["val/mean_target_spearman"]))
    assert "epoch=1" in checkpoint.best_model_path
    # testing a model trained with pre-training reports real metrics (not the NaN of a pre-training epoch)
    result = pl.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False,
                        use_distributed_sampler=False).test(module, fep_data, verbose=False)[0]
    assert math.isfinite(result["test/rmse"])


def test_ligand_atom_mask_excludes_the_global_block(fep_data):
    graph = fep_data.load_dataset()[0]
    mask = ligand_atom_mask(graph)
    assert 0 < int(mask.sum()) < graph.X.size(0)
    assert not graph.is_global[graph.block_id][mask].any()


@pytest.mark.filterwarnings("ignore")
def test_series_batches_hold_one_series_each(fep_data):
    data = BenchmarkAffinityDataModule(plb_root=None, fep_root=fep_data.fep_root, series=SERIES, split="held_out",
                                       test_proteins=["itk"], valid_proteins=["jak1"], max_blocks=400,
                                       group_batches="series", preprocess_workers=0, cache_dir=fep_data.cache_dir)
    batches = list(data.train_dataloader())
    assert len(batches) > 2 and all(len(set(batch.series)) == 1 for batch in batches)
    assert {s for batch in batches for s in batch.series} == {"charge_annhil/jnk1", "charge_annhil/egfr"}
    with pytest.raises(ConfigError, match="group_batches"):
        BenchmarkAffinityDataModule(plb_root=None, fep_root=fep_data.fep_root, group_batches="cluster")
