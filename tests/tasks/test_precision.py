"""``trainer.precision=bf16-mixed`` trains both model families on the CPU: bfloat16 compute, float32 weights,
finite losses."""
from __future__ import annotations

import math

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from geomol.tasks import AffinityModule, BenchmarkAffinityDataModule, DynamicsModule, NBodyDataModule
from tests.conftest import shared_path


class Losses(Callback):
    """Records the training losses and the dtypes that the model's linear layers compute in."""

    def __init__(self):
        self.values, self.linear_dtypes = [], set()

    def on_fit_start(self, trainer, module):
        self.initial = {name: p.detach().clone() for name, p in module.named_parameters()}
        for layer in module.modules():
            if isinstance(layer, torch.nn.Linear):
                layer.register_forward_hook(lambda _, __, out: self.linear_dtypes.add(out.dtype))

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.values.append(float(outputs["loss"]))


def _fit(module, data, tmp_path):
    """Three bf16-mixed steps: matrix products run in bfloat16, weights stay float32 and are updated."""
    losses = Losses()
    pl.Trainer(default_root_dir=tmp_path, precision="bf16-mixed", max_steps=3, limit_val_batches=0, logger=False,
               enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
               use_distributed_sampler=False, callbacks=[losses]).fit(module, data)
    assert losses.linear_dtypes == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in module.parameters())
    assert any(not torch.equal(p, losses.initial[name]) for name, p in module.named_parameters())
    return losses.values


@pytest.mark.filterwarnings("ignore")
def test_bf16_mixed_get(tmp_path):
    data = BenchmarkAffinityDataModule(str(shared_path("plb")), targets=["cdk2", "cmet", "ptp1b"], split="held_out",
                                       test_proteins=["cmet"], valid_proteins=["ptp1b"], max_blocks=300,
                                       cache_dir=str(tmp_path / "cache"), preprocess_workers=0)
    losses = _fit(AffinityModule(hidden=16, num_layers=1), data, tmp_path)
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)


@pytest.mark.filterwarnings("ignore")
def test_bf16_mixed_egno(tmp_path):
    data = NBodyDataModule(cache_dir=None, num_train=40, num_valid=10, num_test=10, max_train=40, batch_size=10)
    losses = _fit(DynamicsModule(hidden=16, num_layers=2), data, tmp_path)
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
