"""The affinity datasets by name, and the entry point of ``geomol preprocess``.

Building a dataset object *is* preprocessing it: every item missing from the processed store is
built (in parallel, with a progress bar), bad items are skipped and reported, and the next
construction only reads the index. :func:`preprocess_affinity` does that for a dataset given by
name and returns the report, so a command line or a Lightning ``prepare_data`` hook can fill
the store once before training processes open it.
"""
from __future__ import annotations

import os
from typing import Any

from geomol.data.datasets.atom3d_lmdb import LBADataset, LEPDataset
from geomol.data.datasets.combined import CombinedAffinityDataset
from geomol.data.datasets.fep_benchmark import FEPBenchmarkDataset
from geomol.data.datasets.pdbbind import PDBbindDataset
from geomol.data.datasets.plb import PLBDataset
from geomol.data.datasets.ppa import PPADataset
from geomol.data.datasets.processed import ProcessedDataset
from geomol.data.preprocess import PreprocessReport
from geomol.errors import ConfigError

__all__ = ["AFFINITY_DATASETS", "affinity_dataset", "preprocess_affinity"]

AFFINITY_DATASETS: dict[str, type[ProcessedDataset]] = {
    "plb": PLBDataset,
    "fep_benchmark": FEPBenchmarkDataset,
    "plb+fep_benchmark": CombinedAffinityDataset,
    "pdbbind": PDBbindDataset,
    "lba": LBADataset,
    "lep": LEPDataset,
    "ppa": PPADataset,
}
"""Dataset name → class; positional arguments of each class are its input paths."""


def affinity_dataset(name: str, *args: Any, **kwargs: Any) -> ProcessedDataset:
    """``affinity_dataset('plb', '../shared/data/plb', cache_dir=...)``: the named dataset, preprocessed."""
    if name not in AFFINITY_DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; known: {sorted(AFFINITY_DATASETS)}")
    return AFFINITY_DATASETS[name](*args, **kwargs)


def preprocess_affinity(name: str, *args: Any, num_workers: int | None = None, progress: bool = True,
                        **kwargs: Any) -> PreprocessReport:
    """Fill the processed store of a dataset and return its report (also written under
    ``<cache_dir>/reports/``). ``num_workers`` defaults to the number of CPUs."""
    workers = (os.cpu_count() or 1) if num_workers is None else num_workers
    return affinity_dataset(name, *args, num_workers=workers, progress=progress, **kwargs).report
