"""The affinity datasets by name.

Building a dataset object *is* preprocessing it: every item missing from the processed store is
built (in parallel, with a progress bar), bad items are skipped and reported (``dataset.report``),
and the next construction only reads the index. ``geomol preprocess`` does that through a config's
data module (its ``prepare_data``), so the store is filled once before training processes open it.
"""
from __future__ import annotations

from typing import Any

from geomol.data.datasets.atom3d_lmdb import LBADataset, LEPDataset
from geomol.data.datasets.combined import CombinedAffinityDataset
from geomol.data.datasets.fep_benchmark import FEPBenchmarkDataset
from geomol.data.datasets.pdbbind import PDBbindDataset
from geomol.data.datasets.plb import PLBDataset
from geomol.data.datasets.ppa import PPADataset
from geomol.data.datasets.processed import ProcessedDataset
from geomol.errors import ConfigError

__all__ = ["AFFINITY_DATASETS", "affinity_dataset"]

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

