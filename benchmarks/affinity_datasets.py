"""Affinity datasets end to end: preprocessing every PLB + FEP-benchmark complex into the
processed store, reopening it, and streaming batches from it.

Measured, with one torch thread per process:

* cold build of :class:`~geomol.data.datasets.combined.CombinedAffinityDataset` (1366 complexes:
  247 PLB + 1119 FEP benchmark; 10 Å pockets, heavy atoms) with 0 and 2 worker processes,
  each into a fresh store; skipped items and their reasons;
* warm reopen (every item found in the store: only hashing memo + index reads);
* loading: one epoch of dynamic batches (≤ 2000 blocks) through a DataLoader with 0 and 2 workers.

Usage: ``python benchmarks/affinity_datasets.py [--output benchmarks/results/affinity_datasets.json]``
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch.utils.data import DataLoader
from torch_geometric.data import Batch

from geomol.data.datasets.combined import CombinedAffinityDataset
from geomol.data.batching.sampler import DynamicBatchSampler
from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
SHARED = shared_data_dir()


def build(cache: Path, workers: int) -> tuple[CombinedAffinityDataset, float]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the counted 'left out' warnings are reported below
        data = CombinedAffinityDataset(SHARED / "plb", SHARED / "fep_benchmark", cache_dir=cache,
                                       num_workers=workers, progress=False)
    return data, time.perf_counter() - start


def load_epoch(data: CombinedAffinityDataset, workers: int) -> dict:
    sampler = DynamicBatchSampler(data.sizes, max_blocks=2000, seed=0)
    loader = DataLoader(data, batch_sampler=sampler, num_workers=workers, collate_fn=Batch.from_data_list)
    start = time.perf_counter()
    items = sum(batch.num_graphs for batch in loader)
    seconds = time.perf_counter() - start
    return {"workers": workers, "batches": len(sampler), "items": items, "seconds": round(seconds, 3),
            "items_per_second": round(items / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "affinity_datasets.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    results: dict = {"date": datetime.date.today().isoformat(), "machine": platform.machine(),
                     "cpus": os.cpu_count(), "torch": torch.__version__, "build": [], "load": []}
    with tempfile.TemporaryDirectory() as tmp:
        for workers in (0, 2):
            data, seconds = build(Path(tmp) / f"store{workers}", workers)
            results["build"].append({"workers": workers, "items": len(data), "seconds": round(seconds, 2),
                                     "items_per_second": round(len(data) / seconds, 1),
                                     "skipped": [[s.id, s.reason] for s in data.skipped]})
        _, seconds = build(Path(tmp) / "store2", 2)
        results["reopen_seconds"] = round(seconds, 3)
        results["mean_blocks"] = round(sum(data.sizes) / len(data), 1)
        results["store_mib"] = round(sum(f.stat().st_size for f in (Path(tmp) / "store2").rglob("*.mdb")) / 2**20, 1)
        results["load"] = [load_epoch(data, workers) for workers in (0, 2)]
    print(f"{'step':<34}{'items':>7}{'seconds':>10}{'items/s':>10}")
    for row in results["build"]:
        print(f"{'build, ' + str(row['workers']) + ' workers':<34}{row['items']:>7}{row['seconds']:>10}"
              f"{row['items_per_second']:>10}")
    print(f"{'reopen (all stored)':<34}{len(data):>7}{results['reopen_seconds']:>10}")
    for row in results["load"]:
        print(f"{'load epoch, ' + str(row['workers']) + ' workers':<34}{row['items']:>7}{row['seconds']:>10}"
              f"{row['items_per_second']:>10}")
    print(f"skipped: {results['build'][0]['skipped']}; mean blocks {results['mean_blocks']}; "
          f"store {results['store_mib']} MiB")
    results["provenance"] = provenance()
    Path(args.output).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
