"""A run interrupted mid-epoch and resumed from its checkpoint continues with the same losses."""
from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from geomol.tasks import AffinityModule, BenchmarkAffinityDataModule
from tests.conftest import shared_path


class SimulatedKill(Exception):
    pass


class KillAt(Callback):
    """Dies when batch ``step + 1`` is about to start, as a killed job would (the checkpoint of ``step`` exists)."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_step == self.step:
            raise SimulatedKill


class LossRecorder(Callback):
    def __init__(self):
        self.losses: dict[int, float] = {}
        self.names: dict[int, list[str]] = {}

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses[trainer.global_step] = float(outputs["loss"])
        self.names[trainer.global_step] = list(batch.name)


def _data(cache):
    return BenchmarkAffinityDataModule(str(shared_path("plb")), targets=["cdk2", "cmet", "ptp1b"],
                                       split="held_out", test_proteins=["cmet"], valid_proteins=["ptp1b"],
                                       max_blocks=250, cache_dir=str(cache), preprocess_workers=0, seed=3)


def _trainer(root, recorder, **kwargs):
    return pl.Trainer(default_root_dir=root, max_epochs=2, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, use_distributed_sampler=False, num_sanity_val_steps=0,
                      limit_val_batches=1, callbacks=[recorder, *kwargs.pop("callbacks", [])], **kwargs)


def _module():
    return AffinityModule(hidden=16, radial_dim=8, num_rbf=8, num_layers=1, num_heads=2, dropout=0.3, lr=3e-3)


@pytest.mark.filterwarnings("ignore:.*exceed the budget")
def test_resumed_run_reproduces_the_uninterrupted_losses(tmp_path):
    pl.seed_everything(5)
    full = LossRecorder()
    _trainer(tmp_path / "full", full).fit(_module(), _data(tmp_path / "cache"))
    steps_per_epoch = len(full.losses) // 2
    stop = steps_per_epoch + steps_per_epoch // 2  # in the middle of the second epoch

    pl.seed_everything(5)
    first = LossRecorder()
    saver = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=stop, save_top_k=-1)
    with pytest.raises(SimulatedKill):
        _trainer(tmp_path / "part", first, callbacks=[saver, KillAt(stop)]).fit(_module(), _data(tmp_path / "cache"))
    ckpt = next((tmp_path / "ckpt").glob("*.ckpt"))
    assert torch.load(ckpt, weights_only=True)["global_step"] == stop

    pl.seed_everything(99)  # the checkpoint, not the seed, must decide what happens next
    resumed = LossRecorder()
    _trainer(tmp_path / "resumed", resumed).fit(_module(), _data(tmp_path / "cache"), ckpt_path=ckpt)

    assert sorted(resumed.losses) == list(range(stop + 1, 2 * steps_per_epoch + 1))
    for step, loss in resumed.losses.items():
        assert resumed.names[step] == full.names[step], f"step {step} saw other complexes"
        assert loss == pytest.approx(full.losses[step], rel=1e-5, abs=1e-6), f"step {step}"
    assert [first.losses[s] for s in sorted(first.losses)] == [full.losses[s] for s in range(1, stop + 1)]
