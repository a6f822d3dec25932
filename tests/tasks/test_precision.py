"""``trainer.precision=bf16-mixed`` trains both model families on the CPU with finite losses."""
from __future__ import annotations

import math

import lightning.pytorch as pl
import pytest
from lightning.pytorch.callbacks import Callback

from geomol.tasks import AffinityModule, BenchmarkAffinityDataModule, DynamicsModule, NBodyDataModule
from tests.conftest import shared_path


class Losses(Callback):
    def __init__(self):
        self.values = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.values.append(float(outputs["loss"]))


def _fit(module, data, tmp_path):
    losses = Losses()
    pl.Trainer(default_root_dir=tmp_path, precision="bf16-mixed", max_steps=3, limit_val_batches=0, logger=False,
               enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
               use_distributed_sampler=False, callbacks=[losses]).fit(module, data)
    return losses.values


@pytest.mark.filterwarnings("ignore")
def test_bf16_mixed_get(tmp_path):
    data = BenchmarkAffinityDataModule(str(shared_path("plb")), targets=["cdk2", "cmet", "ptp1b"], split="held_out",
                                       test_proteins=["cmet"], valid_proteins=["ptp1b"], max_blocks=300,
                                       cache_dir=str(tmp_path / "cache"), preprocess_workers=0)
    losses = _fit(AffinityModule(d_hidden=16, n_layers=1), data, tmp_path)
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)


@pytest.mark.filterwarnings("ignore")
def test_bf16_mixed_egno(tmp_path):
    data = NBodyDataModule(cache_dir=None, num_train=40, num_valid=10, num_test=10, max_train=40, batch_size=10)
    losses = _fit(DynamicsModule(hidden=16, num_layers=2), data, tmp_path)
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
