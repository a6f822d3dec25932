"""Lightning without the noise a ``geomol fit`` user cannot act on.

* Lightning's "💡 Tip: ... try installing litlogger / litmodels" advertisements (info messages of its
  ``rank_zero`` logger) are dropped; every other message passes.
* Lightning's own use of a torch pytree API that torch deprecates (``isinstance(treespec, LeafSpec)``) warns on
  every run; that warning is for Lightning's developers, not for ours, and is ignored.
* The model summary's FLOPs column and "Total FLOPs: 0" line: Lightning counts FLOPs only for a module
  with an ``example_input_array``, which no geomol task has, so they always said 0.
  :class:`ModelSummary` prints the summary without them (with them when a count exists), and
  :func:`replace_model_summary` puts it in place of Lightning's summary callback where the trainer has one
  (``enable_model_summary: false`` still means no summary).
"""
from __future__ import annotations

import logging
import warnings
from typing import Any

from lightning.pytorch.callbacks import ModelSummary as LightningModelSummary
from lightning.pytorch.utilities.model_summary import get_human_readable_count

__all__ = ["quiet_lightning", "ModelSummary", "replace_model_summary"]

_ADVERTISEMENT = "💡 Tip:"
_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


class _DropAdvertisements(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(_ADVERTISEMENT)


def quiet_lightning() -> None:
    """Install the filters of the module notes (idempotent)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropAdvertisements) for f in logger.filters):
            logger.addFilter(_DropAdvertisements())
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", module=r"lightning\..*")


class ModelSummary(LightningModelSummary):
    """Lightning's model summary (layers, types, parameters, mode) without a FLOPs count that was never made."""

    @staticmethod
    def summarize(summary_data: list[tuple[str, list[str]]], total_parameters: int, trainable_parameters: int,
                  model_size: float, total_training_modes: dict[str, int], total_flops: int,
                  **summarize_kwargs: Any) -> None:
        from rich.table import Table

        from geomol.terminal import console as plain_console

        columns = [(name, values) for name, values in summary_data if name != "FLOPs" or total_flops]
        table = Table(header_style=summarize_kwargs.get("header_style", "bold"))
        for name, _ in columns:
            table.add_column(name, justify="right" if name in ("Params", "FLOPs") else "left")
        for row in zip(*(values for _, values in columns)):
            table.add_row(*row)
        console = plain_console()
        console.print(table)
        totals = [f"Trainable params: {get_human_readable_count(trainable_parameters)}",
                  f"Non-trainable params: {get_human_readable_count(total_parameters - trainable_parameters)}",
                  f"Total params: {get_human_readable_count(total_parameters)}",
                  f"Estimated size: {model_size:.3f} MB",
                  f"Modules in train / eval mode: {total_training_modes['train']} / {total_training_modes['eval']}"]
        if total_flops:
            totals.append(f"Total FLOPs: {get_human_readable_count(total_flops)}")
        console.print("\n".join(totals))


def replace_model_summary(callbacks: list) -> None:
    """Swap Lightning's model-summary callback in ``callbacks`` (in place) for :class:`ModelSummary`, same depth."""
    for i, callback in enumerate(callbacks):
        if isinstance(callback, LightningModelSummary) and not isinstance(callback, ModelSummary):
            callbacks[i] = ModelSummary(max_depth=callback._max_depth)
