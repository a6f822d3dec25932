"""The base of the LightningModules: optimiser set-up, the graph recipe in checkpoints, epoch-level metrics.

Every task collects per-item predictions during an evaluation epoch (:mod:`geomol.tasks.gather`) and computes
its metrics once at the end over all items (correlations are not averages of per-batch values).
"""
from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch

from geomol.tasks.callbacks import (EpochLength, FinalCheckpoint, PredictionWriter, RandomStateCheckpoint,
                                    ValidationReport)
from geomol.tasks.gather import EpochCollector
from geomol.training.optim import adam_with_decay

__all__ = ["GeomolModule"]


class GeomolModule(pl.LightningModule):
    """Base of the task modules.

    Subclasses call ``super().__init__()`` and ``self.save_hyperparameters()`` with ``lr``,
    ``final_lr`` and ``weight_decay`` among their arguments, build ``self.model``, and implement

    * ``compute(batch, batch_idx) -> (loss, batch_size, output)`` — one forward pass;
    * ``collect(batch, output)`` — add per-item columns to ``self.collector`` during evaluation;
    * ``epoch_metrics(columns) -> dict`` — metrics over the whole evaluation epoch.

    Optimiser: Adam with weight decay and optional per-step exponential decay to ``final_lr``.
    A non-finite training loss skips the update (as the reference trainers do).

    Graphs: ``self.recipe`` is how the data module builds its graphs (a
    :class:`~geomol.data.complexes.recipe.ComplexRecipe` or
    :class:`~geomol.data.dynamics.protocol.TrajectoryProtocol`, the class in ``recipe_type``), taken from the data module's ``graph_recipe`` at set-up and stored in
    every checkpoint as ``recipe.to_dict()`` under ``geomol_preprocessing``, so that prediction builds
    graphs as training did.
    """

    recipe_type: type | None = None

    def __init__(self):
        super().__init__()
        self.collector = EpochCollector()
        self.recipe = None

    def setup(self, stage: str) -> None:
        recipe = getattr(getattr(self.trainer, "datamodule", None), "graph_recipe", None)
        if recipe is not None:
            self.recipe = recipe

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["geomol_preprocessing"] = {} if self.recipe is None else self.recipe.to_dict()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        record = checkpoint.get("geomol_preprocessing")
        if record and self.recipe_type is not None:
            self.recipe = self.recipe_type.from_dict(record, source="checkpoint")

    def configure_callbacks(self):
        return [RandomStateCheckpoint(), ValidationReport(), FinalCheckpoint(), EpochLength(), PredictionWriter()]

    @property
    def stage(self) -> str:
        return "test" if self.trainer.testing else "val"

    def training_step(self, batch, batch_idx):
        loss, size, _ = self.compute(batch, batch_idx)
        if not torch.isfinite(loss):
            self.print(f"skipping step {self.global_step}: non-finite loss")
            return None
        self.log("train/loss", loss, batch_size=size, prog_bar=True)
        return loss

    def _evaluate(self, batch, batch_idx: int) -> None:
        loss, size, output = self.compute(batch, batch_idx)
        self.log(f"{self.stage}/loss", loss, batch_size=size, sync_dist=True)
        self.collect(batch, output)

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, batch_idx)

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, batch_idx)

    def _finish_epoch(self) -> None:
        columns = self.collector.pop()
        if columns and not self.trainer.sanity_checking:
            self._log_metrics(self.stage, self.epoch_metrics(columns))

    def on_validation_epoch_end(self) -> None:
        self._finish_epoch()

    def on_test_epoch_end(self) -> None:
        self._finish_epoch()

    def configure_optimizers(self):
        hp = self.hparams
        total = int(self.trainer.estimated_stepping_batches) if self.trainer is not None else 0
        return adam_with_decay(self.parameters(), hp.lr, hp.weight_decay, hp.get("final_lr"), total)

    def _log_metrics(self, stage: str, metrics: dict[str, float], batch_size: int | None = None) -> None:
        # values are already global (gathered), so no cross-rank reduction is needed; shown in the
        # progress bar, as Lightning users expect of validation metrics
        self.log_dict({f"{stage}/{k}": float(v) for k, v in metrics.items()}, prog_bar=True,
                      sync_dist=False, batch_size=batch_size, rank_zero_only=False)
