"""A tiny EGNO trained for a few steps on MDAnalysisTests' AdK trajectory (CA atoms), exported as a shipped model.

The checkpoint is written by Lightning after ``Trainer.fit`` with the real data module, so it carries
the data protocol exactly as ``geomol fit`` records it. Hidden 16, two layers, six steps: the tests
check the rollout plumbing (windows, velocities, files, errors), not accuracy.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

datafiles = pytest.importorskip("MDAnalysisTests.datafiles")

SELECTION = "name CA"
TINY_EGNO = dict(node_features=2, edge_features=2, hidden=16, num_layers=2, num_timesteps=4, lr=1e-3)


def train_tiny_egno(folder: Path) -> Path:
    """Fit a tiny EGNO for 6 steps on PSF + DCD (CA atoms, Δ 15, P 4); returns the checkpoint path."""
    import lightning.pytorch as pl

    from geomol.tasks import DynamicsModule, MDTrajectoryDataModule

    pl.seed_everything(0, verbose=False)
    data = MDTrajectoryDataModule(datafiles.PSF, datafiles.DCD, selection=SELECTION, batch_size=8)
    module = DynamicsModule(**TINY_EGNO)
    trainer = pl.Trainer(max_steps=6, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, limit_val_batches=0, accelerator="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, data)
    path = folder / "tiny_egno.ckpt"
    trainer.save_checkpoint(path)
    return path
