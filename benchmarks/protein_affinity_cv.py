"""Protein–protein affinity: GET and the baselines side by side on the same leave-cluster-out folds.

Data: ``../shared/data/protein_affinity`` (484 complexes, 208 sequence clusters; PDBbind-PP, GET's training set,
is not available here, so the GET paper's split cannot be repeated). Five folds hold whole clusters out
(:func:`geomol.data.datasets.protein_affinity.cluster_folds`, seed 0); every row of the table is predicted on
them, each complex by the model of the fold that held it out. Three steps, each resumable::

    python benchmarks/protein_affinity_cv.py features          # interface descriptors + PRODIGY, once per complex
    python benchmarks/protein_affinity_cv.py get --variant plb --epochs 15      # GET, fold by fold (background)
    python benchmarks/protein_affinity_cv.py get --variant scratch --epochs 15
    python benchmarks/protein_affinity_cv.py table             # the table + JSON

``features`` writes ``runs/protein_affinity/features.json`` (per complex: interface residues within 8 Å, buried
surface (freesasa), contact counts by residue class, PRODIGY's ΔG and descriptors from its own package);
``get`` writes ``runs/protein_affinity/get_<variant>/fold{k}.json`` (a fold already written is skipped, an
interrupted one resumes from its last checkpoint); ``table`` fits the baselines on each fold's training side,
scores every model on the held-out folds — pooled Pearson, Spearman and RMSE (kcal/mol), per category and per
PPAB difficulty class — and writes ``benchmarks/results/protein_affinity_cv.json`` with the run record.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from geomol.data.paths import shared_data_dir

RUNS = Path("runs/protein_affinity")
RESULT = Path(__file__).resolve().parent / "results" / "protein_affinity_cv.json"
GET_VARIANTS = {"scratch": None, "plb": "get-plb"}
"""GET rows: from scratch, or starting from the weights of the shipped protein–ligand model get-plb (member 0)."""


def _features(args) -> None:
    from geomol.evaluation.protein_affinity_cv import complex_features

    out = RUNS / "features.json"
    done = json.loads(out.read_text()) if out.is_file() else {}
    rows = complex_features(args.root, done, progress=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} complexes ({sum(1 for r in rows.values() if r.get('error'))} with an error) -> {out}")


def _get(args) -> None:
    from geomol.evaluation.protein_affinity_get import PPAFold, train_fold

    out_dir = RUNS / f"get_{args.variant}"
    for fold in args.folds or range(5):
        if (out_dir / f"fold{fold}.json").is_file():
            print(f"fold {fold}: done already")
            continue
        result = train_fold(PPAFold(fold, str(out_dir), init=GET_VARIANTS[args.variant], epochs=args.epochs,
                                    root=args.root, cache_dir=args.cache_dir))
        print(f"fold {fold}: best validation RMSE {result['best_val_rmse_pK']:.3f} pK, "
              f"{result['cpu_seconds'] / 60:.1f} CPU min", flush=True)


def _table(args) -> None:
    from geomol.benchmarking.run_record import run_metadata, write_result
    from geomol.evaluation.protein_affinity_cv import cross_validation_table, format_table

    features = json.loads((RUNS / "features.json").read_text())
    get_runs = {f"GET ({name})": RUNS / f"get_{name}" for name in GET_VARIANTS if (RUNS / f"get_{name}").is_dir()}
    table = cross_validation_table(args.root, features, get_runs)
    print(format_table(table))
    write_result(RESULT, {**run_metadata(threads=1), **table})


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("features", "get", "table"))
    parser.add_argument("--root", default=str(shared_data_dir() / "protein_affinity"), help="the data folder")
    parser.add_argument("--variant", choices=sorted(GET_VARIANTS), default="plb", help="get: which GET row")
    parser.add_argument("--folds", type=int, nargs="+", help="get: only these folds (default all five)")
    parser.add_argument("--epochs", type=int, default=15, help="get: epochs per fold")
    parser.add_argument("--cache-dir", default=None, help="processed store ($GEOMOL_CACHE)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = build_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    {"features": _features, "get": _get, "table": _table}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
