"""Callbacks every geomol task adds to its Trainer (:meth:`GeomolModule.configure_callbacks`).

* :class:`RandomStateCheckpoint` keeps torch's random state in checkpoints, so a resumed run draws as an
  uninterrupted one;
* :class:`ValidationReport` prints the validation metrics after each validation of a fit;
* :class:`FinalCheckpoint` makes every fit end with a checkpoint of its last step, also when a
  short run (``max_steps``, ``limit_val_batches: 0``, ``check_val_every_n_epoch`` larger than the
  run) never validated, and says where the checkpoints are;
* :class:`EpochLength` sizes each training epoch by its own number of batches (block-budget batching packs a
  different number of batches each epoch), so that every epoch trains on all its batches and validates at its end;
* :class:`CPUTime` logs the CPU hours a fit has used, summed over the runs that resumed it (a long run's cost);
* :class:`PredictionWriter` writes ``geomol predict``'s outputs, one row per item with its name,
  as ``predictions.csv`` and ``predictions.json`` in the run's log directory.
"""
from __future__ import annotations

import csv
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.trainer.connectors.data_connector import _parse_num_batches
from lightning.pytorch.trainer.states import RunningStage

from geomol.tasks.gather import gather_objects

__all__ = ["RandomStateCheckpoint", "ValidationReport", "FinalCheckpoint", "EpochLength", "CPUTime", "PredictionWriter",
           "prediction_rows"]


class RandomStateCheckpoint(Callback):
    """Store torch's global random state in every checkpoint and restore it on resume.

    Dropout draws from that state, so a run resumed mid-epoch (with the loaders of
    :mod:`geomol.data.batching.loader`, which do not touch the global state) continues with exactly the
    masks, and therefore the losses, of an uninterrupted run. Only restored by ``Trainer.fit(ckpt_path=...)``,
    never by ``load_from_checkpoint``.
    """

    def state_dict(self) -> dict[str, Any]:
        return {"torch": torch.get_rng_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        torch.set_rng_state(state_dict["torch"])


def _format_metrics(metrics: dict[str, Any], prefix: str) -> str:
    parts = [f"{name} {float(value):.4g}" for name, value in sorted(metrics.items()) if name.startswith(prefix)]
    return "  ".join(parts)


class ValidationReport(Callback):
    """Print one line with every ``val/*`` metric after each validation during ``fit``.

    The progress bar shows them too, but it is redrawn every step; this line stays in the log.
    """

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        line = _format_metrics(trainer.callback_metrics, "val/")
        if line:
            pl_module.print(f"validation after epoch {trainer.current_epoch}, step {trainer.global_step}: {line}")


class FinalCheckpoint(Callback):
    """Save a checkpoint of the last step when a fit ends and no checkpoint holds that step yet.

    ``ModelCheckpoint`` saves after validations only, so a run that stops between them (or never
    validates) would otherwise end without a checkpoint of its final weights. The file is the one
    the config's unmonitored ``ModelCheckpoint`` writes (``last.ckpt``), else ``last.ckpt`` beside
    the monitored checkpoints; nothing is saved when checkpointing is disabled.
    """

    def __init__(self):
        self._saved_step: int | None = None

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        self._saved_step = trainer.global_step

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        checkpoints = [cb for cb in trainer.callbacks if isinstance(cb, ModelCheckpoint)]
        if not checkpoints or checkpoints[0].dirpath is None:
            pl_module.print("checkpointing is disabled: no checkpoint written")
            return
        if self._saved_step != trainer.global_step and trainer.global_step > 0:
            trainer.save_checkpoint(self._last_path(trainer, checkpoints))
        monitors = sorted({cb.monitor for cb in checkpoints if cb.monitor and not cb.best_model_path})
        if monitors:
            pl_module.print(f"no checkpoint selected by {', '.join(monitors)}: the run ended before a validation "
                            "computed it (see check_val_every_n_epoch, val_check_interval, limit_val_batches)")
        self._report(pl_module, checkpoints)

    @staticmethod
    def _last_path(trainer: pl.Trainer, checkpoints: list[ModelCheckpoint]) -> str:
        unmonitored = [cb for cb in checkpoints if cb.monitor is None]
        if unmonitored:
            metrics = {**trainer.callback_metrics, "epoch": torch.tensor(trainer.current_epoch),
                       "step": torch.tensor(trainer.global_step)}
            path = unmonitored[0].format_checkpoint_name(metrics)
            unmonitored[0].last_model_path = path
            return path
        return os.path.join(checkpoints[0].dirpath, "last" + ModelCheckpoint.FILE_EXTENSION)

    @staticmethod
    def _report(pl_module: pl.LightningModule, checkpoints: list[ModelCheckpoint]) -> None:
        for cb in checkpoints:
            if cb.monitor and cb.best_model_path:
                score = float(cb.best_model_score) if cb.best_model_score is not None else math.nan
                pl_module.print(f"best checkpoint ({cb.monitor} {score:.4g}): {cb.best_model_path}")
            elif cb.monitor is None and (cb.last_model_path or cb.best_model_path):
                pl_module.print(f"last checkpoint: {cb.last_model_path or cb.best_model_path}")


class EpochLength(Callback):
    """Size every training epoch by the batches of that epoch, not by those of the first.

    Lightning reads the training loader's length once, when it sets up the data: an epoch ends after that many
    batches, and with ``val_check_interval`` a fraction it validates when the batch index reaches a multiple of that
    length times the fraction. Batches formed by a block budget
    (:class:`~geomol.data.batching.sampler.DynamicBatchSampler`) pack each epoch's shuffle into a slightly different
    number of batches, so without this an epoch with fewer batches than the first ends without validating (no
    validation score, no early-stopping check, no best checkpoint for it) and one with more leaves its last batches
    out. At the start of each epoch, after the sampler has been given the epoch, this sets the epoch's number of
    batches (``limit_train_batches`` applied as Lightning applies it) and, for a fractional
    ``val_check_interval``, the batch interval between validations. Loaders without a length are left alone.
    A run resumed in the middle of an epoch gets no epoch-start hook for that epoch; its loader has the epoch from
    the checkpoint (:meth:`~geomol.data.batching.sampler.EpochBatchSampler.load_state_dict`), and the epoch is
    sized when training starts.
    """

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._size_epoch(trainer)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._size_epoch(trainer)

    @staticmethod
    def _size_epoch(trainer: pl.Trainer) -> None:
        loop = trainer.fit_loop
        combined = loop._combined_loader
        if combined is None or not all(hasattr(loader, "__len__") for loader in combined.flattened):
            return
        limits = [_parse_num_batches(RunningStage.TRAINING, len(loader), trainer.limit_train_batches)
                  for loader in combined.flattened]
        combined.limits = limits
        loop.max_batches = max(limits)
        fractional = isinstance(trainer.val_check_interval, float)
        if fractional and getattr(trainer, "_val_check_time_interval", None) is None and loop.max_batches > 0:
            trainer.val_check_batch = max(1, int(loop.max_batches * trainer.val_check_interval))


class CPUTime(Callback):
    """Log ``time/cpu_hours``: the CPU time of the training process since the fit began, at every validation.

    The total is kept in checkpoints, so a run resumed with ``--ckpt_path`` continues the count of the runs
    before it (time spent after the checkpoint by an interrupted run is not counted). It counts this process
    only (all its threads; not data-loader worker processes) and reads ``time.process_time``: CPU seconds,
    not wall time.
    """

    def __init__(self):
        self._earlier_seconds = 0.0
        self._start = time.process_time()

    def cpu_seconds(self) -> float:
        """CPU seconds of this fit, runs before a resume included."""
        return self._earlier_seconds + time.process_time() - self._start

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = time.process_time()

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking and trainer.state.fn == "fit":
            pl_module.log("time/cpu_hours", self.cpu_seconds() / 3600.0)

    def state_dict(self) -> dict[str, Any]:
        return {"cpu_seconds": self.cpu_seconds()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._earlier_seconds, self._start = float(state_dict["cpu_seconds"]), time.process_time()


def _per_item(value: Any, size: int) -> list[Any] | None:
    """The B per-item values of a predict-step output column, or None if it is not one."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 or value.size(0) != size:
            return None
        return [v.item() if v.dim() == 0 else v.tolist() for v in value]
    if isinstance(value, (list, tuple)) and len(value) == size:
        return [v.tolist() if isinstance(v, torch.Tensor) else v for v in value]
    return None


def prediction_rows(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows (one per item, ``name`` first) of one predict step's ``{column: [B] values}`` output."""
    size = len(outputs["name"])
    columns = {key: _per_item(value, size) for key, value in outputs.items()}
    columns = {key: values for key, values in columns.items() if values is not None}
    return [{key: values[i] for key, values in columns.items()} for i in range(size)]


class PredictionWriter(Callback):
    """Collect ``predict_step`` outputs (dicts of per-item columns with a ``name`` column) and write them.

    ``predictions.csv`` holds the scalar columns (e.g. ``name, pK, measured_pK``);
    ``predictions.json`` every column (e.g. predicted positions [N, P, 3] in Å for trajectories).
    Both go to ``trainer.log_dir`` (the run's ``predict`` folder when the checkpoint is in a run).
    """

    def __init__(self):
        self._rows: list[dict[str, Any]] = []

    def on_predict_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._rows = []

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if isinstance(outputs, dict) and "name" in outputs:
            self._rows.extend(prediction_rows(outputs))

    def on_predict_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        rows = gather_objects(self._rows)
        out = Path(trainer.log_dir or trainer.default_root_dir)
        if trainer.is_global_zero and rows:
            write_predictions(rows, out)
            pl_module.print(f"predictions of {len(rows)} items: {out / 'predictions.csv'}, {out / 'predictions.json'}")


def write_predictions(rows: list[dict[str, Any]], out: Path) -> None:
    """``out/predictions.csv`` (scalar columns) and ``out/predictions.json`` (all columns)."""
    out.mkdir(parents=True, exist_ok=True)
    scalar = [key for key, value in rows[0].items() if not isinstance(value, (list, dict))]
    with open(out / "predictions.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=scalar, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (out / "predictions.json").write_text(json.dumps(rows))
