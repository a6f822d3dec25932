"""``DynamicsModule(model="egnn", teacher_forcing=True)``: teacher-forced while training, free rollouts when evaluated,
trained by ``geomol fit``'s Trainer like any other model; refused for EGNO."""
from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from geomol.errors import ConfigError
from geomol.tasks import DynamicsModule, NBodyDataModule

TINY_EGNN = dict(model="egnn", hidden=16, num_layers=2, num_timesteps=5, lr=1e-3)


def _data():
    data = NBodyDataModule(cache_dir=None, num_train=40, num_valid=10, num_test=10, max_train=40, batch_size=10)
    data.setup("fit")
    return data


def test_training_is_teacher_forced_and_evaluation_rolls_out():
    data = _data()
    batch = next(iter(data.train_dataloader()))
    torch.manual_seed(0)
    module = DynamicsModule(teacher_forcing=True, **TINY_EGNN)
    with torch.no_grad():
        module.train()
        torch.testing.assert_close(module(batch), module.model(batch, batch.X_target).x)
        module.eval()
        torch.testing.assert_close(module(batch), module.model(batch).x)
    assert not torch.allclose(module.model(batch, batch.X_target).x, module.model(batch).x)


def test_teacher_forced_training_makes_a_rollout_that_beats_no_motion(tmp_path):
    """Trained only on teacher-forced steps, the free rollout that validation scores ends below the error of
    standing still (the untrained rollout is thousands of times above it)."""
    data = _data()
    still = torch.stack([(b.X.unsqueeze(1) - b.X_target).pow(2).mean() for b in data.val_dataloader()]).mean()
    torch.manual_seed(0)
    module = DynamicsModule(teacher_forcing=True, **TINY_EGNN)
    trainer = pl.Trainer(default_root_dir=tmp_path, max_steps=120, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False)
    before = trainer.validate(module, data, verbose=False)[0]["val/s2t_mse"]
    trainer.fit(module, data)
    after = trainer.validate(module, data, verbose=False)[0]["val/s2t_mse"]
    assert after < float(still) < before, (before, float(still), after)


def test_teacher_forcing_is_refused_for_egno():
    with pytest.raises(ConfigError, match="teacher_forcing is for the EGNN baseline"):
        DynamicsModule(model="egno", teacher_forcing=True)
