"""WarmStart: a fit begins from a checkpoint's weights with a fresh optimizer; a checkpoint of another model is refused."""
from __future__ import annotations

import warnings

import pytest
import torch

from geomol.errors import ModelLoadError
from geomol.tasks.warm_start import WarmStart
from tests.rollout_fixtures import TINY_EGNO, datafiles, train_tiny_egno

lightning = pytest.importorskip("lightning.pytorch")


def _fit(module, callbacks, steps=0):
    from geomol.tasks import MDTrajectoryDataModule

    data = MDTrajectoryDataModule(datafiles.PSF, datafiles.DCD, selection="name CA", batch_size=8)
    trainer = lightning.Trainer(max_steps=steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                                enable_model_summary=False, limit_val_batches=0, accelerator="cpu",
                                callbacks=callbacks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, data)
    return trainer


def test_fit_starts_from_the_checkpoint_weights_with_a_fresh_schedule(tmp_path):
    from geomol.tasks import DynamicsModule

    path = train_tiny_egno(tmp_path)
    saved = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    module = DynamicsModule(**TINY_EGNO)
    assert any(not torch.equal(module.state_dict()[k], v) for k, v in saved.items())  # a new model differs
    trainer = _fit(module, [WarmStart(str(path))])
    assert all(torch.equal(module.state_dict()[k], v) for k, v in saved.items())
    assert trainer.optimizers[0].param_groups[0]["lr"] == TINY_EGNO["lr"]  # not the saved run's optimizer state
    trained = _fit(DynamicsModule(**TINY_EGNO), [WarmStart(str(path))], steps=2).lightning_module
    assert any(not torch.equal(trained.state_dict()[k], v) for k, v in saved.items())  # and it trains on from there


def test_another_model_or_a_missing_file_is_refused_by_name(tmp_path):
    from geomol.tasks import DynamicsModule

    path = train_tiny_egno(tmp_path)
    with pytest.raises(ModelLoadError, match="do not fit this model") as err:
        _fit(DynamicsModule(**{**TINY_EGNO, "hidden": 8}), [WarmStart(str(path))])
    assert str(path) in str(err.value)
    with pytest.raises(ModelLoadError, match="no such checkpoint"):
        _fit(DynamicsModule(**TINY_EGNO), [WarmStart(str(tmp_path / "absent.ckpt"))])


def test_a_shipped_models_member_starts_a_fit_of_the_same_architecture():
    from types import SimpleNamespace

    from geomol.inference.loading import load_model
    from geomol.tasks import AffinityModule

    shipped = load_model("get-plb")
    module = AffinityModule(**{k: v for k, v in shipped.arguments.items() if k != "readout"})
    WarmStart("get-plb", member=2).setup(SimpleNamespace(), module, "fit")
    expected = shipped.members[2].state_dict()
    assert all(torch.equal(value, expected[key]) for key, value in module.model.state_dict().items())
    with pytest.raises(ModelLoadError, match="no member 7: the model has 5"):
        WarmStart("get-plb", member=7).setup(SimpleNamespace(), module, "fit")
    small = AffinityModule(hidden=16, num_block_types=150)
    with pytest.raises(ModelLoadError, match="weights do not fit"):
        WarmStart("get-plb").setup(SimpleNamespace(), small, "fit")
