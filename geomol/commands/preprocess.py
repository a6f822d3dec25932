"""``geomol preprocess``: build a config's processed-data store ahead of training.

Reads the ``data`` section of a ``geomol fit`` config, instantiates its data module and runs
its ``prepare_data``: every item is read, its pocket selected and its graph stored once, in
parallel worker processes with a progress bar. Interrupting is safe: finished items are kept and
a rerun only builds the rest. Items that cannot be built are skipped and listed in a report
(``<cache>/reports/<dataset>.json`` and ``.skipped.csv``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from geomol.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="a geomol fit config (YAML) with a 'data' section")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all CPUs)")
    parser.add_argument("--cache-dir", help="processed-data store (default: the config's, else $GEOMOL_CACHE)")


def data_module_from_config(path: str | Path, **overrides):
    """Instantiate the data module of a config file, with ``init_args`` overrides."""
    import lightning.pytorch as pl
    from jsonargparse import ArgumentParser

    from geomol.tasks.cli import read_config

    config = read_config(path)
    if "data" not in config:
        raise ConfigError("config has no 'data' section", source=path)
    data = dict(config["data"])
    data["init_args"] = {**data.get("init_args", {}), **{k: v for k, v in overrides.items() if v is not None}}
    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(pl.LightningDataModule, "data")
    try:
        namespace = parser.parse_object({"data": data})
        return parser.instantiate_classes(namespace).data
    except Exception as exc:  # jsonargparse reports unknown classes or arguments in many ways
        raise ConfigError(f"invalid 'data' section: {exc}", source=path) from None


def run(args: argparse.Namespace) -> int:
    overrides = {"cache_dir": args.cache_dir}
    module = data_module_from_config(args.config, **overrides)
    if hasattr(module, "preprocess_workers"):
        module.preprocess_workers = args.workers
    module.prepare_data()
    sizes = module.split_sizes() if hasattr(module, "split_sizes") else {}
    print("processed: " + ", ".join(f"{name} {n}" for name, n in sizes.items()))
    return 0
