"""``geomol preprocess``: build a config's processed-data store ahead of training.

Reads the ``data`` section of a ``geomol fit`` config, instantiates its data module and runs
its ``prepare_data``: every item is read, its pocket selected and its graph stored once, in
parallel worker processes with a progress bar. Interrupting is safe: finished items are kept and
a rerun only builds the rest. Items that cannot be built are skipped and listed in a report
(``<cache>/reports/<dataset>.json`` and ``.skipped.csv``). At the end it prints, per dataset, the
items built, reused and skipped (with reasons), items per second and the store's size on disk.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from geomol.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="a geomol fit config with a 'data' section: a shipped "
                        "config's name (get_plb) or a YAML file")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all CPUs)")
    parser.add_argument("--cache-dir", help="processed-data store (default: the config's, else $GEOMOL_CACHE)")


def data_module_from_config(path: str | Path, **overrides):
    """Instantiate the data module of a config file, with ``init_args`` overrides."""
    import lightning.pytorch as pl
    from jsonargparse import ArgumentParser

    from geomol.shipped_configs import resolve_config
    from geomol.config_files import expand_shared_data_paths, read_config

    config = read_config(resolve_config(str(path)))
    if "data" not in config:
        raise ConfigError("config has no 'data' section", source=path)
    data = dict(config["data"])
    data["init_args"] = {**data.get("init_args", {}), **{k: v for k, v in overrides.items() if v is not None}}
    expand_shared_data_paths(data)
    parser = ArgumentParser(allow_abbrev=False, exit_on_error=False)
    parser.add_subclass_arguments(pl.LightningDataModule, "data")
    try:
        namespace = parser.parse_object({"data": data})
        return parser.instantiate_classes(namespace).data
    except Exception as exc:  # jsonargparse reports unknown classes or arguments in many ways
        raise ConfigError(f"invalid 'data' section: {exc}", source=path) from None


def disk_usage(path: str | Path) -> int:
    """Bytes a file or folder occupies on disk (allocated blocks: an LMDB map file is sparse)."""
    path = Path(path)
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_blocks * 512 for p in files)


def report_lines(report) -> list[str]:
    """What one :class:`~geomol.data.store.preprocess.PreprocessReport` says: counts, speed, skipped items."""
    lines = [f"{report.name}: {report.total} items, built {report.built}, reused {report.reused}, skipped "
             f"{len(report.skipped)} in {report.seconds:.1f} s ({report.items_per_second:.2f} items/s built)"]
    if report.skipped:
        lines += [f"  skipped {s.id}: {s.reason}" for s in report.skipped[:_SHOWN_SKIPPED]]
        more = len(report.skipped) - _SHOWN_SKIPPED
        lines += [f"  ... and {more} more"] if more > 0 else []
        lines.append(f"  all skipped items: {Path(report.store) / 'reports' / report.name}.skipped.csv")
    return lines


_SHOWN_SKIPPED = 10


def run(args: argparse.Namespace) -> int:
    overrides = {"cache_dir": args.cache_dir}
    module = data_module_from_config(args.config, **overrides)
    if hasattr(module, "preprocess_workers"):
        module.preprocess_workers = args.workers
    module.prepare_data()
    reports = getattr(module, "preprocess_reports", [])
    for report in reports:
        print("\n".join(report_lines(report)))
    for store in dict.fromkeys(report.store for report in reports if report.store):
        print(f"store {store}: {disk_usage(Path(store) / 'store.lmdb') / 2**20:.1f} MiB on disk")
    sizes = module.split_sizes() if hasattr(module, "split_sizes") else {}
    print("processed: " + ", ".join(f"{name} {n}" for name, n in sizes.items()))
    return 0
