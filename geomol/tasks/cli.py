"""``geomol fit|validate|test|predict``: Lightning's ``LightningCLI`` over the geomol tasks.

A config names a LightningModule and a LightningDataModule by class path (``model.class_path``,
``data.class_path``) with their arguments, plus Trainer settings; any key can be overridden on
the command line (``--trainer.max_epochs 5``, ``--data.init_args.fold 2``). Our loaders shard
over DDP ranks themselves, so ``trainer.use_distributed_sampler`` defaults to False.

Scripts that train (cross-validation, the shipped-model recipe) take the same path without a
command line: :func:`build_from_config` instantiates trainer, model and data from a YAML config
deep-merged with overrides, exactly as ``geomol fit --config`` does, and the script calls
``cli.trainer.fit(cli.model, cli.datamodule)``.
"""
from __future__ import annotations

import copy
import sys
from os import PathLike
from pathlib import Path
from typing import Any, Mapping

import lightning.pytorch as pl
import yaml
from lightning.pytorch.cli import LightningCLI

from geomol.errors import ConfigError

from geomol.data.recipe import ComplexRecipe

__all__ = ["GeomolCLI", "run_lightning", "build_from_config", "merge_config", "read_config"]


def _block_types(data_init_args) -> int:
    """Rows of the block embedding a data module's graphs need (its recipe's base vocabulary + fragments)."""
    fragments = data_init_args.get("fragments") if data_init_args is not None else None
    return ComplexRecipe.from_options(fragments=fragments or None).num_block_types


class GeomolCLI(LightningCLI):
    """LightningCLI with geomol's defaults (task and data classes in subclass mode).

    GET tasks get ``n_block_types`` from the data section (150 plus the fragment types of its
    vocabulary) before they are built, so the model exists when callbacks that copy it (weight
    averaging) are set up.
    """

    def before_instantiate_classes(self) -> None:
        config = self.config.get(str(self.subcommand), self.config) if self.subcommand else self.config
        model = config.get("model")
        init_args = model.get("init_args") if model is not None else None
        if init_args is not None and "n_block_types" in init_args and init_args.get("n_block_types") is None:
            data = config.get("data")
            init_args["n_block_types"] = _block_types(data.get("init_args") if data is not None else None)


_CLI_OPTIONS = dict(subclass_mode_model=True, subclass_mode_data=True,
                    trainer_defaults={"use_distributed_sampler": False}, save_config_kwargs={"overwrite": True})


def read_config(path: str | PathLike) -> dict[str, Any]:
    """A YAML config as a dict; unreadable files raise :class:`ConfigError`."""
    try:
        config = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config: {exc}", source=path) from None
    if not isinstance(config, dict):
        raise ConfigError("a config must be a mapping (trainer, model, data, ...)", source=path)
    return config


def merge_config(base: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in: mappings key by key (recursively), anything else replaced."""
    merged = copy.deepcopy(dict(base))
    for key, value in (overrides or {}).items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_config(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def build_from_config(config: str | PathLike | Mapping[str, Any],
                      overrides: Mapping[str, Any] | None = None) -> GeomolCLI:
    """Trainer, model and data module of a ``geomol fit`` config (a YAML path or a dict), with ``overrides``
    deep-merged in (:func:`merge_config`), instantiated as ``geomol fit`` does (seed, block types, Trainer
    defaults) but not run: ``cli.trainer.fit(cli.model, cli.datamodule)``."""
    base = read_config(config) if isinstance(config, (str, PathLike)) else config
    return GeomolCLI(pl.LightningModule, pl.LightningDataModule, args=merge_config(base, overrides), run=False,
                     **_CLI_OPTIONS)


def run_lightning(argv: list[str]) -> int:
    """Run ``argv`` (``['fit', '--config', ...]``) through :class:`GeomolCLI`; returns 0 on success.

    The arguments go through ``sys.argv``: Lightning's DDP launcher starts the other ranks by
    re-running this process's command line.
    """
    saved = sys.argv
    sys.argv = [saved[0], *argv]
    try:
        GeomolCLI(pl.LightningModule, pl.LightningDataModule, parser_kwargs={"prog": "geomol"}, **_CLI_OPTIONS)
    finally:
        sys.argv = saved
    return 0
