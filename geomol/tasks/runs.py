"""Lightning runs of a ``geomol fit`` config without a command line, for library code that trains (GET's
cross-validation, the shipped-model recipes): :func:`build_from_config` instantiates trainer, model and data from a
YAML config deep-merged with overrides, exactly as ``geomol fit --config`` does (:mod:`geomol.tasks.cli`), and the
caller runs ``cli.trainer.fit(cli.model, cli.datamodule)``.
"""
from __future__ import annotations

from os import PathLike
from typing import Any, Mapping

import lightning.pytorch as pl

from geomol.config_files import merge_config, read_config
from geomol.shipped_configs import resolve_config
from geomol.tasks.cli import CLI_OPTIONS, GeomolCLI
from geomol.tasks.quiet import quiet_lightning

__all__ = ["build_from_config"]


def build_from_config(config: str | PathLike | Mapping[str, Any],
                      overrides: Mapping[str, Any] | None = None) -> GeomolCLI:
    """Trainer, model and data module of a ``geomol fit`` config (a YAML path or a dict), with ``overrides``
    deep-merged in (:func:`merge_config`), instantiated as ``geomol fit`` does (seed, block types, Trainer
    defaults) but not run: ``cli.trainer.fit(cli.model, cli.datamodule)``."""
    quiet_lightning()
    base = read_config(resolve_config(str(config))) if isinstance(config, (str, PathLike)) else config
    return GeomolCLI(pl.LightningModule, pl.LightningDataModule, args=merge_config(base, overrides), run=False,
                     **CLI_OPTIONS)
