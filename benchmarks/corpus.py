"""Corpus counts per source and cross-source protein clusters, with the leave-cluster-out splits.

Reads the four affinity sources of the shared data folder (plb, fep_benchmark, uni_fep,
ddg_bindingdb), clusters their receptors (:mod:`geomol.data.splits.protein_clusters`: sequence identity
≥ 0.9 of the shorter ligand-contact chain, or a shared source name; cached as JSON in the
processed-data directory, so only the first run aligns), and prints

* per source: items, series, source protein groups, protein clusters;
* clusters shared between sources (with their sources);
* items per source in a train/valid/test split by cluster and in each of 5 leave-cluster-out
  folds, each checked for leakage (no cluster, no ligand–protein pair in two parts).

The JSON records the counts, the clustering statistics (seconds, pairs aligned), the command,
commit, versions, threads and machine load.

Usage: ``python benchmarks/corpus.py [--cache-dir DIR] [--sequence-only] [--output benchmarks/results/corpus.json]``
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import Bio

from geomol.data.splits.corpus import (
    check_corpus_split,
    corpus_split,
    format_split_counts,
    item_clusters,
    leave_cluster_out_folds,
    split_counts,
)
from geomol.data.datasets.corpus import read_corpus
from geomol.data.splits.protein_clusters import load_protein_clusters

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GEOMOL_SHARED_DATA", REPO.parent / "shared" / "data"))


def source_counts(items, labels) -> dict[str, dict[str, int]]:
    """Per source: items, series, source protein groups, protein clusters."""
    table: dict[str, dict[str, int]] = {}
    for source in dict.fromkeys(item.source for item in items):
        mine = [(item, label) for item, label in zip(items, labels) if item.source == source]
        table[source] = {"items": len(mine), "series": len({i.series for i, _ in mine}),
                         "source_groups": len({i.protein_group for i, _ in mine}),
                         "clusters": len({label for _, label in mine})}
    table["all"] = {"items": len(items), "series": len({i.series for i in items}),
                    "source_groups": len({(i.source, i.protein_group) for i in items}), "clusters": len(set(labels))}
    return table


def shared_clusters(items, labels) -> dict[str, dict[str, int]]:
    """Clusters with items from two or more sources: ``{cluster: {source: items}}``, largest first."""
    per_cluster: dict[str, Counter] = {}
    for item, label in zip(items, labels):
        per_cluster.setdefault(label, Counter())[item.source] += 1
    shared = {c: dict(n) for c, n in per_cluster.items() if len(n) > 1}
    return dict(sorted(shared.items(), key=lambda kv: -sum(kv[1].values())))


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=SHARED)
    parser.add_argument("--cache-dir", type=Path, default=None, help="processed-data directory (default $GEOMOL_CACHE)")
    parser.add_argument("--sequence-only", action="store_true",
                        help="drop the source names: clusters from sequence identity alone (aligns many more pairs)")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "corpus.json")
    args = parser.parse_args()

    start = time.perf_counter()
    corpus = read_corpus(args.root)
    read_seconds = time.perf_counter() - start
    receptors = [replace(r, names=()) for r in corpus.receptors] if args.sequence_only else corpus.receptors
    clusters, cache_file = load_protein_clusters(receptors, cache_dir=args.cache_dir, progress=True)
    labels = item_clusters(corpus.items, clusters)

    counts = source_counts(corpus.items, labels)
    print(f"{'source':<15}{'items':>7}{'series':>8}{'groups':>8}{'clusters':>9}")
    for source, row in counts.items():
        print(f"{source:<15}{row['items']:>7}{row['series']:>8}{row['source_groups']:>8}{row['clusters']:>9}")
    shared = shared_clusters(corpus.items, labels)
    print(f"\n{len(shared)} clusters hold items of two or more sources:")
    for name, per_source in shared.items():
        print(f"  {name:<22}" + ", ".join(f"{s} {n}" for s, n in per_source.items()))
    print(f"\nclustering: {clusters.stats} (cache {cache_file})")

    split = corpus_split(labels)
    check_corpus_split(split, corpus.items, labels)
    print("\ntrain/valid/test by cluster (checked: no cluster or ligand-protein pair in two parts)")
    print(format_split_counts(split_counts(split, corpus.items)))
    folds = leave_cluster_out_folds(labels)
    fold_tests = {f"fold{n}": fold["test"] for n, fold in enumerate(folds)}
    check_corpus_split(fold_tests, corpus.items, labels)
    for fold in folds:
        check_corpus_split(fold, corpus.items, labels)
    print("\n5-fold leave-cluster-out, test items per fold (each fold's train/valid/test checked)")
    print(format_split_counts(split_counts(fold_tests, corpus.items)))

    record = {"command": " ".join([sys.executable.rsplit("/", 1)[-1], *sys.argv]), "commit": _commit(),
              "versions": {"python": platform.python_version(), "biopython": Bio.__version__},
              "threads": {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "")},
              "machine": {"cores": os.cpu_count(), "load_average_1_5_15_min_at_end": [round(x, 2) for x in os.getloadavg()]},
              "read_seconds": round(read_seconds, 1), "sequence_only": args.sequence_only, "clustering": clusters.stats, "counts": counts,
              "shared_clusters": shared, "split": split_counts(split, corpus.items),
              "folds": split_counts(fold_tests, corpus.items)}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
