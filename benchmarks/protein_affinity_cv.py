"""Protein–protein affinity: GET and the baselines side by side on the same leave-cluster-out folds.

Data: ``../shared/data/protein_affinity`` (484 complexes, 208 sequence clusters; PDBbind-PP, GET's training set,
is not available here, so the GET paper's split cannot be repeated). Five folds hold whole clusters out
(:func:`geomol.data.datasets.protein_affinity.cluster_folds`, seed 0); every row of the table is predicted on
them, each complex by the model of the fold that held it out. Three steps, each resumable::

    python benchmarks/protein_affinity_cv.py features          # interface descriptors + PRODIGY, once per complex
    python benchmarks/protein_affinity_cv.py get --variant plb          # GET, fold by fold (background)
    python benchmarks/protein_affinity_cv.py get --variant scratch
    python benchmarks/protein_affinity_cv.py table             # the table + JSON
    python benchmarks/protein_affinity_cv.py export            # models/ppa-affinity from the chosen GET run

``features`` writes ``runs/protein_affinity/features.json`` (per complex: interface residues within 8 Å, buried
surface (freesasa), contact counts by residue class, PRODIGY's ΔG and descriptors from its own package, and the
frozen protein–ligand GET's complex embedding and pK);
``get`` writes ``runs/protein_affinity/get_<variant>/fold{k}.json`` (a fold already written is skipped, an
interrupted one resumes from its last checkpoint); ``table`` fits the baselines on each fold's training side,
scores every model on the held-out folds — pooled Pearson, Spearman and RMSE (kcal/mol), per category and per
PPAB difficulty class — and writes ``benchmarks/results/protein_affinity_cv.json`` with the run record;
``export`` ships the five fold models of the GET variant with the lowest mean validation RMSE as
``models/ppa-affinity`` (:mod:`geomol.evaluation.protein_affinity_ship`).
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
    from geomol.evaluation.protein_affinity_cv import complex_features, frozen_get_features

    out = RUNS / "features.json"
    done = json.loads(out.read_text()) if out.is_file() else {}
    rows = complex_features(args.root, done, progress=True)
    if not all("get_plb" in row for row in rows.values()):
        for name, values in frozen_get_features(args.root, cache_dir=args.cache_dir).items():
            rows[name]["get_plb"] = values
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
                                    root=args.root, cache_dir=args.cache_dir, max_blocks=args.max_blocks))
        print(f"fold {fold}: best validation RMSE {result['best_val_rmse_pK']:.3f} pK, "
              f"{result['cpu_seconds'] / 60:.1f} CPU min", flush=True)


def _table(args) -> None:
    from geomol.benchmarking.run_record import run_metadata, write_result
    from geomol.evaluation.protein_affinity_cv import cross_validation_table, format_table

    features = json.loads((RUNS / "features.json").read_text())
    table = cross_validation_table(args.root, features, _get_runs())
    print(format_table(table))
    rows = [{"model": name, **scores["all"]} for name, scores in table["scores"].items()]
    write_result(RESULT, run_metadata(threads=1), rows, **table)


def _get_runs() -> dict[str, Path]:
    return {f"GET ({name})": RUNS / f"get_{name}" for name in GET_VARIANTS if (RUNS / f"get_{name}").is_dir()}


def _export(args) -> None:
    from geomol.evaluation.protein_affinity_ship import ship_model

    table = json.loads(RESULT.read_text())
    out = ship_model(table, _get_runs(), args.root, Path(__file__).resolve().parent.parent / "models" / "ppa-affinity",
                     cache_dir=args.cache_dir)
    print(f"wrote {out}")


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("features", "get", "table", "export"))
    parser.add_argument("--root", default=str(shared_data_dir() / "protein_affinity"), help="the data folder")
    parser.add_argument("--variant", choices=sorted(GET_VARIANTS), default="plb", help="get: which GET row")
    parser.add_argument("--folds", type=int, nargs="+", help="get: only these folds (default all five)")
    parser.add_argument("--epochs", type=int, default=4, help="get: epochs per fold (the recorded runs: 4)")
    parser.add_argument("--max-blocks", type=int, default=500, help="get: blocks per batch (about 8 complexes)")
    parser.add_argument("--cache-dir", default=None, help="processed store ($GEOMOL_CACHE)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = build_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    {"features": _features, "get": _get, "table": _table, "export": _export}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
