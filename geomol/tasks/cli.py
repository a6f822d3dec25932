"""``geomol fit|validate|test|predict``: Lightning's ``LightningCLI`` over the geomol tasks.

A config names a LightningModule and a LightningDataModule by class path (``model.class_path``,
``data.class_path``) with their arguments, plus Trainer settings; any key can be overridden on
the command line (``--trainer.max_epochs 5``, ``--data.init_args.fold 2``). Our loaders shard
over DDP ranks themselves, so ``trainer.use_distributed_sampler`` defaults to False.
"""
from __future__ import annotations

import sys

import lightning.pytorch as pl
from lightning.pytorch.cli import LightningCLI

__all__ = ["GeomolCLI", "run_lightning"]


class GeomolCLI(LightningCLI):
    """LightningCLI with geomol's defaults (task and data classes in subclass mode)."""


def run_lightning(argv: list[str]) -> int:
    """Run ``argv`` (``['fit', '--config', ...]``) through :class:`GeomolCLI`; returns 0 on success.

    The arguments go through ``sys.argv``: Lightning's DDP launcher starts the other ranks by
    re-running this process's command line.
    """
    saved = sys.argv
    sys.argv = [saved[0], *argv]
    try:
        GeomolCLI(
            pl.LightningModule,
            pl.LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            trainer_defaults={"use_distributed_sampler": False},
            save_config_kwargs={"overwrite": True},
            parser_kwargs={"prog": "geomol"},
        )
    finally:
        sys.argv = saved
    return 0
