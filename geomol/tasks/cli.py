"""``geomol fit|validate|test|predict``: Lightning's ``LightningCLI`` over the geomol tasks.

A config names a LightningModule and a LightningDataModule by class path (``model.class_path``,
``data.class_path``) with their arguments, plus Trainer settings; any key can be overridden on
the command line (``--trainer.max_epochs 5``, ``--data.init_args.fold 2``). Our loaders shard
over DDP ranks themselves, so ``trainer.use_distributed_sampler`` defaults to False.

Where output goes: relative ``save_dir`` of loggers and ``dirpath`` of checkpoint callbacks are
below ``trainer.default_root_dir`` (``runs`` in the shipped configs), so ``--trainer.default_root_dir
DIR`` moves a whole run. ``validate``/``test``/``predict`` on a checkpoint of a run
(``<run>/version_N/checkpoints/x.ckpt``) log into ``<run>/version_N/<subcommand>``. ``fit --ckpt_path last`` continues the interrupted run in its own
version folder, its ``metrics.csv`` kept (:mod:`geomol.tasks.resume`).

Shipped configs are named by short name (``--config get_plb``, :mod:`geomol.shipped_configs`); the data
folders they give as ``${GEOMOL_SHARED_DATA}/...`` are resolved here (``$GEOMOL_SHARED_DATA``, ``geomol fit
--shared-data DIR``, else the shared folder beside the checkout), in the data and model sections of any config.
Lightning's advertisements, a deprecation warning meant for its developers and the model summary's empty
FLOPs count are left out (:mod:`geomol.tasks.quiet`).

Library code that trains (cross-validation, the shipped-model recipe) takes the same path without a
command line: :func:`geomol.tasks.runs.build_from_config`.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.cli import LightningCLI

from geomol.data.complexes.recipe import ComplexRecipe
from geomol.errors import GeomolError
from geomol.config_files import expand_shared_data_paths
from geomol.tasks.quiet import quiet_lightning, replace_model_summary
from geomol.tasks.resume import continue_run

__all__ = ["GeomolCLI", "CLI_OPTIONS", "PARSER_OPTIONS", "run_lightning"]

EVALUATION_SUBCOMMANDS = ("validate", "test", "predict")


def _block_types(data_init_args) -> int:
    """Rows of the block embedding a data module's graphs need (its recipe's base vocabulary + fragments)."""
    fragments = data_init_args.get("fragments") if data_init_args is not None else None
    return ComplexRecipe.from_options(fragments=fragments or None).num_block_types


class GeomolCLI(LightningCLI):
    """LightningCLI with geomol's defaults (task and data classes in subclass mode).

    GET tasks get ``num_block_types`` from the data section (150 plus the fragment types of its
    vocabulary) before they are built, so the model exists when callbacks that copy it (weight
    averaging) are set up.
    """

    def before_instantiate_classes(self) -> None:
        config = self.config.get(str(self.subcommand), self.config) if self.subcommand else self.config
        model = config.get("model")
        init_args = model.get("init_args") if model is not None else None
        if init_args is not None and "num_block_types" in init_args and init_args.get("num_block_types") is None:
            data = config.get("data")
            init_args["num_block_types"] = _block_types(data.get("init_args") if data is not None else None)
        for section in ("data", "model"):
            expand_shared_data_paths(config.get(section))
        trainer = config.get("trainer")
        self._earlier_logs = []
        if trainer is not None:
            _place_outputs(trainer)
            _drop_progress_bars(trainer)
            if self.subcommand in EVALUATION_SUBCOMMANDS:
                _evaluation_outputs(trainer, config.get("ckpt_path"), str(self.subcommand))
            if self.subcommand == "fit" and str(config.get("ckpt_path")) == "last":
                self._earlier_logs = continue_run(trainer)

    def instantiate_classes(self) -> None:
        with self._hint_on_error():
            super().instantiate_classes()
        self.trainer.callbacks.extend(getattr(self, "_earlier_logs", []))
        replace_model_summary(self.trainer.callbacks)

    def _run_subcommand(self, subcommand: str) -> None:
        with self._hint_on_error():
            super()._run_subcommand(subcommand)

    def _hint_on_error(self):
        return _DataHint(self.config.get(str(self.subcommand), self.config) if self.subcommand else self.config)


class _DataHint:
    """Context manager: a GeomolError about a path that a ``data`` argument gave gets ``hint``,
    the option that sets it (``--data.init_args.root``), for the command's one-line message."""

    def __init__(self, config):
        self.config = config

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, traceback) -> bool:
        if isinstance(error, GeomolError) and error.source and not getattr(error, "hint", None):
            key = _data_key_for(self.config, error.source)
            if key is not None:
                error.hint = f"pass --data.init_args.{key} PATH"
        return False


def _data_key_for(config, source: str) -> str | None:
    data = config.get("data") if config is not None else None
    init_args = data.get("init_args") if data is not None else None
    if init_args is None:
        return None
    target = os.path.normpath(source)
    for key, value in (init_args.items() if hasattr(init_args, "items") else vars(init_args).items()):
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            if isinstance(item, (str, os.PathLike)) and str(item):
                path = os.path.normpath(str(item))
                if target == path or target.startswith(path + os.sep):
                    return key
    return None


def _entries(value: Any) -> list:
    """Logger or callback config entries: a list, one entry, or nothing (``True``/``False``/``None``)."""
    if value is None or isinstance(value, bool):
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _class_name(entry) -> str:
    return str(entry.get("class_path", "")).rsplit(".", 1)[-1] if hasattr(entry, "get") else type(entry).__name__


def _drop_progress_bars(trainer) -> None:
    """``--trainer.enable_progress_bar false`` over a config that names a progress-bar callback (the shipped
    configs name ``RichProgressBar``): the flag wins, as on a plain Trainer, instead of Lightning refusing the pair."""
    if trainer.get("enable_progress_bar") is not False:
        return
    callbacks = trainer.get("callbacks")
    if isinstance(callbacks, (list, tuple)):
        trainer["callbacks"] = [entry for entry in callbacks if not _class_name(entry).endswith("ProgressBar")]


def _place_outputs(trainer) -> None:
    """Put relative logger ``save_dir`` and checkpoint ``dirpath`` below ``trainer.default_root_dir``."""
    root = trainer.get("default_root_dir")
    if not root:
        return
    # absolute and resolved, as ModelCheckpoint stores a dirpath it is given: a later
    # `geomol test` then finds the checkpoint callbacks' folder unchanged
    root = os.path.realpath(os.path.expanduser(str(root)))
    trainer["default_root_dir"] = root
    for entry, key in [(e, "save_dir") for e in _entries(trainer.get("logger"))] + \
                      [(e, "dirpath") for e in _entries(trainer.get("callbacks"))]:
        init_args = entry.get("init_args") if hasattr(entry, "get") else None
        value = init_args.get(key) if init_args is not None else None
        if value is not None and not os.path.isabs(str(value)):
            init_args[key] = os.path.normpath(os.path.join(root, str(value)))


def _evaluation_outputs(trainer, ckpt_path, subcommand: str) -> None:
    """validate/test/predict on a checkpoint: its checkpoint callbacks point at its folder (they write
    nothing outside fit; their saved state then matches), and a checkpoint inside a run
    (``version_N/checkpoints``) logs into ``version_N/<subcommand>`` instead of a new version."""
    if not ckpt_path or str(ckpt_path) in ("last", "best", "hpc", "registry"):
        return
    checkpoint = Path(str(ckpt_path))
    for entry in _entries(trainer.get("callbacks")):
        init_args = entry.get("init_args") if hasattr(entry, "get") else None
        if _class_name(entry) == "ModelCheckpoint" and init_args is not None:
            init_args["dirpath"] = str(checkpoint.parent)
    if checkpoint.parent.name != "checkpoints" or not checkpoint.parent.parent.name.startswith("version_"):
        return
    for entry in _entries(trainer.get("logger")):
        init_args = entry.get("init_args") if hasattr(entry, "get") else None
        if init_args is not None and "save_dir" in init_args:
            init_args["version"] = f"{checkpoint.parent.parent.name}/{subcommand}"


PARSER_OPTIONS = {"prog": "geomol", "allow_abbrev": False,
                  **{sub: {"allow_abbrev": False} for sub in ("fit", "validate", "test", "predict")}}
"""jsonargparse's parsers, the main one and each subcommand's: no abbreviated options (``--trainer.max_epoch`` is an
error, not ``--trainer.max_epochs``)."""
CLI_OPTIONS = dict(subclass_mode_model=True, subclass_mode_data=True,
                    trainer_defaults={"use_distributed_sampler": False}, save_config_kwargs={"overwrite": True})


def run_lightning(argv: list[str]) -> int:
    """Run ``argv`` (``['fit', '--config', ...]``) through :class:`GeomolCLI`; returns 0 on success.

    The arguments go through ``sys.argv``: Lightning's DDP launcher starts the other ranks by
    re-running this process's command line.
    """
    quiet_lightning()
    saved = sys.argv
    sys.argv = [saved[0], *argv]
    try:
        GeomolCLI(pl.LightningModule, pl.LightningDataModule, parser_kwargs=PARSER_OPTIONS, **CLI_OPTIONS)
    finally:
        sys.argv = saved
    return 0
