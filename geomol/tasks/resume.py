"""``geomol fit --ckpt_path last`` continues the interrupted run: its logger version and its learning curve.

Lightning looks for ``ckpt_path="last"`` in the checkpoint callbacks' folders, which sit inside the first
logger's version folder (``<save_dir>/<name>/version_N/checkpoints``). A new process with versioned loggers
would open ``version_{N+1}``, find no checkpoint there and start from scratch; and Lightning's CSV logger,
given an existing version, deletes that version's ``metrics.csv``. Here:

* :func:`continue_run` points every logger of a fit config that names no version at the version folder
  holding the newest ``last*.ckpt`` of the run, so Lightning resumes from it and logs beside it;
* :class:`EarlierLog` keeps the rows the interrupted run had written to ``metrics.csv`` up to the step of
  the checkpoint (rows of earlier steps) and writes them back before the resumed run appends its own, so the file reads as an
  uninterrupted run's (rows logged between that checkpoint and the interruption are dropped: the resumed
  run logs those steps again).
"""
from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger

__all__ = ["continue_run", "EarlierLog", "METRICS_FILE"]

METRICS_FILE = "metrics.csv"
_DEFAULT_NAME = "lightning_logs"
_VERSION = re.compile(r"version_(\d+)$")


def _entries(value: Any) -> list:
    if value is None or isinstance(value, bool):
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _init_args(entry) -> Any:
    return entry.get("init_args") if hasattr(entry, "get") else None


def _run_folder(init_args) -> Path | None:
    save_dir = init_args.get("save_dir")
    if save_dir is None:
        return None
    return Path(str(save_dir)) / str(init_args.get("name") or _DEFAULT_NAME)


def newest_resumable_version(run: Path) -> str | None:
    """The ``version_N`` folder of ``run`` whose ``checkpoints/last*.ckpt`` was written last, if any."""
    newest: tuple[float, str] | None = None
    for folder in run.glob("version_*"):
        if not _VERSION.match(folder.name):
            continue
        for checkpoint in (folder / "checkpoints").glob("last*.ckpt"):
            stamp = checkpoint.stat().st_mtime
            if newest is None or stamp > newest[0]:
                newest = (stamp, folder.name)
    return None if newest is None else newest[1]


def continue_run(trainer_config) -> list["EarlierLog"]:
    """Prepare a fit config's loggers for ``--ckpt_path last`` (see the module notes).

    Args:
        trainer_config: the ``trainer`` section of the parsed config, with absolute ``save_dir``s
            (after :func:`geomol.tasks.cli.GeomolCLI` has placed outputs below ``default_root_dir``).
            Loggers without a ``version`` get the version of the newest resumable checkpoint of the
            first logger's run; loggers with one keep it.

    Returns:
        One :class:`EarlierLog` per CSV logger whose version folder already holds a ``metrics.csv``:
        callbacks to add to the Trainer.
    """
    loggers = [args for args in map(_init_args, _entries(trainer_config.get("logger"))) if args is not None]
    if not loggers:
        return []
    first_run = _run_folder(loggers[0])
    version = newest_resumable_version(first_run) if first_run is not None else None
    earlier = []
    for entry, args in zip(_entries(trainer_config.get("logger")), loggers):
        if args.get("version") is None and version is not None:
            args["version"] = version
        run = _run_folder(args)
        if run is None or args.get("version") is None or "CSVLogger" not in str(entry.get("class_path", "")):
            continue
        metrics = run / str(args["version"]) / METRICS_FILE
        if metrics.is_file():
            earlier.append(EarlierLog.read(metrics))
    return earlier


class EarlierLog(Callback):
    """The rows of an interrupted run's ``metrics.csv``, written back when the resumed run starts training.

    Args:
        path: the CSV file (the resumed run's CSV logger writes the same file).
        header: its column names.
        rows: its rows, as read (strings).
    """

    def __init__(self, path: Path, header: list[str], rows: list[dict[str, str]]):
        self.path, self.header, self.rows = Path(path), list(header), rows

    @classmethod
    def read(cls, path: Path) -> "EarlierLog":
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            return cls(path, list(reader.fieldnames or []), rows)

    def kept_rows(self, global_step: int) -> list[dict[str, str]]:
        """The rows the checkpoint of ``global_step`` covers: Lightning logs the batch that takes the run from
        step ``s`` to ``s + 1``, and the validation after it, at step ``s``, so rows of steps below it."""
        return [row for row in self.rows if row.get("step", "") != "" and int(float(row["step"])) < global_step]

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.global_rank != 0:
            return
        writer = next((logger.experiment for logger in trainer.loggers if isinstance(logger, CSVLogger)
                       and os.path.samefile(Path(logger.log_dir), self.path.parent)), None)
        if writer is None:
            return
        writer.save()  # anything the resumed run logged before training starts goes after the earlier rows
        later = []
        if self.path.is_file():
            with open(self.path, newline="", encoding="utf-8") as handle:
                later = list(csv.DictReader(handle))
        header = sorted(set(self.header) | set(writer.metrics_keys) | {key for row in later for key in row})
        with open(self.path, "w", newline="", encoding="utf-8") as handle:
            out = csv.DictWriter(handle, fieldnames=header)
            out.writeheader()
            out.writerows(self.kept_rows(trainer.global_step) + later)
        writer.metrics_keys = header  # the writer appends under this header from now on
