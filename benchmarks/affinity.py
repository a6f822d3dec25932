"""Binding-affinity prediction: seconds per ligand end to end, and the cross-validation table.

``speed`` — :func:`geomol.predict_affinity` over protein-ligand-benchmark targets on ONE CPU
thread, end to end from files (receptor PDB parse, SDF parse, pockets, graphs, batched ensemble
forward), median of ``--repeats`` runs per target after one warm-up, as wall-clock and as CPU time
(one thread: CPU time is what an idle core would take; on a shared machine wall-clock is longer).
Model loading is timed separately (once per process). The model is ``--model`` (default: the shipped default model);
if that is missing, a model of the default recipe's architecture (``configs/get_affinity_default.yaml``)
with random weights and ``--members`` members is timed instead — speed does not depend on the weights.
Reference: the published peer (PIGNet2, a 4-model ensemble) takes 0.13 s per ligand on one CPU thread
(``../shared/BENCHMARKS.md``).

``cv`` — prints the cross-validation results of the affinity recipe from a JSON file written by
whoever runs the cross-validation (default ``benchmarks/results/affinity_cv.json``), schema::

    {"description": str, "model": str, "split": str,
     "per_target": {"<target>": {"fold": int, "n": int, "pearson": float, "spearman": float, "rmse": float}},
     "folds": [{"fold": int, "test_targets": [str], "n": int, "pearson": float, "spearman": float, "rmse": float}],
     "summary": {"mean_target_spearman": float, "mean_target_pearson": float, ...}}

Every section is optional; numeric columns are printed as found.

Usage::

    python benchmarks/affinity.py speed [--targets tnks2 cdk2] [--model PATH] [--members 5]
    python benchmarks/affinity.py cv [--results benchmarks/results/affinity_cv.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
import yaml

from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
SHARED = shared_data_dir()
DEFAULT_RECIPE = REPO / "configs" / "get_affinity_default.yaml"
PEER_SECONDS_PER_LIGAND = 0.13  # PIGNet2 ensemble, one CPU thread (../shared/BENCHMARKS.md)


# ---------------------------------------------------------------------- speed
def _random_default_model(members: int):
    """The default recipe's architecture with random weights (for timing when no trained model exists)."""
    from geomol.data.complexes.recipe import ComplexRecipe
    from geomol.inference import AffinityModel
    from geomol.models.get import GETAffinity, GETConfig

    recipe = yaml.safe_load(DEFAULT_RECIPE.read_text()) if DEFAULT_RECIPE.is_file() else {}
    data = recipe.get("data", {}).get("init_args", {})
    graphs = ComplexRecipe(**{k: data[k] for k in ("pocket_cutoff", "keep_hydrogens") if k in data})
    config = GETConfig.from_mapping({**recipe.get("model", {}).get("init_args", {}),
                                     "num_block_types": graphs.num_block_types})
    torch.manual_seed(0)
    return AffinityModel([GETAffinity(config) for _ in range(members)], config.to_dict(), graphs,
                         name=f"random weights, {DEFAULT_RECIPE.name} architecture")


def _load(model_ref: str, members: int):
    import geomol
    from geomol.errors import ModelLoadError

    start = time.perf_counter()
    try:
        model = geomol.load_model(model_ref)
    except ModelLoadError as exc:
        if model_ref != "default":
            raise
        print(f"note: {exc.reason.split(':')[0]}; timing random weights instead", file=sys.stderr)
        model = _random_default_model(members)
    return model, time.perf_counter() - start


def _time_target(target: str, model, repeats: int, batch_size: int) -> dict:
    import geomol

    receptor = SHARED / "plb" / target / "01_protein" / "crd" / "protein.pdb"
    ligands = SHARED / "plb" / target / "02_ligands" / "ligands.sdf"
    wall, cpu = [], []
    for _ in range(repeats + 1):  # the first run warms up allocator and caches
        start, start_cpu = time.perf_counter(), time.process_time()
        records = geomol.predict_affinity(receptor, ligands, model=model, batch_size=batch_size)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    n = len(records)
    return {"target": target, "ligands": n, "failed": sum(not r.ok for r in records),
            "mean_pocket_blocks": round(sum(r.n_pocket_blocks or 0 for r in records) / n, 1),
            "seconds": round(statistics.median(wall[1:]), 3), "cpu_seconds": round(statistics.median(cpu[1:]), 3)}


def speed(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    targets = sorted(p.name for p in (SHARED / "plb").iterdir() if p.is_dir()) if args.targets == ["all"] \
        else args.targets
    model, load_seconds = _load(args.model, args.members)
    members = len(model.members)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sanitisation notes of the PLB files are not the subject here
        rows = [_time_target(t, model, args.repeats, args.batch_size) for t in targets]
    total_ligands = sum(r["ligands"] for r in rows)
    per_ligand = sum(r["seconds"] for r in rows) / total_ligands
    cpu_per_ligand = sum(r["cpu_seconds"] for r in rows) / total_ligands
    result = {"date": datetime.date.today().isoformat(), "machine": platform.machine(), "cpus": os.cpu_count(),
              "torch": torch.__version__, "threads": torch.get_num_threads(), "model": model.name or args.model,
              "members": members, "architecture": model.arguments, "batch_size": args.batch_size,
              "repeats": args.repeats, "model_load_seconds": round(load_seconds, 3), "targets": rows,
              "ligands": total_ligands, "seconds_per_ligand": round(per_ligand, 4),
              "cpu_seconds_per_ligand": round(cpu_per_ligand, 4),
              "cpu_seconds_per_ligand_per_member": round(cpu_per_ligand / members, 4),
              "peer_seconds_per_ligand": PEER_SECONDS_PER_LIGAND, "provenance": provenance()}
    print(f"model: {result['model']} ({members} member(s)); load {load_seconds:.2f} s; 1 thread; "
          f"batch {args.batch_size}; median of {args.repeats}")
    print(f"{'target':<10}{'ligands':>8}{'failed':>8}{'pocket':>8}{'seconds':>9}{'s/ligand':>10}{'cpu s/ligand':>14}")
    for r in rows:
        print(f"{r['target']:<10}{r['ligands']:>8}{r['failed']:>8}{r['mean_pocket_blocks']:>8}{r['seconds']:>9.2f}"
              f"{r['seconds'] / r['ligands']:>10.4f}{r['cpu_seconds'] / r['ligands']:>14.4f}")
    print(f"{'all':<10}{total_ligands:>8}{'':>25}{per_ligand:>10.4f}{cpu_per_ligand:>14.4f}   "
          f"(CPU {cpu_per_ligand / members:.4f} s per member; peer {PEER_SECONDS_PER_LIGAND} s)")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1) + "\n")


# ---------------------------------------------------------------------- cross-validation table
def _print_rows(title: str, rows: list[tuple[str, dict]]) -> None:
    columns = [c for c in dict.fromkeys(k for _, row in rows for k in row) if c != "test_targets"]
    print(f"\n{title}")
    print(f"{'':<12}" + "".join(f"{c:>11}" for c in columns))
    for label, row in rows:
        cells = [row.get(c) for c in columns]
        print(f"{label:<12}" + "".join(f"{c:>11.3f}" if isinstance(c, float) else f"{'' if c is None else c!s:>11}"
                                       for c in cells))


def cross_validation(args: argparse.Namespace) -> int:
    path = Path(args.results)
    if not path.is_file():
        print(f"no cross-validation results at {path}: run the folds of {DEFAULT_RECIPE.relative_to(REPO)} "
              "and write them in the schema of this script's docstring", file=sys.stderr)
        return 1
    results = json.loads(path.read_text())
    print(" · ".join(str(results[k]) for k in ("description", "model", "split") if results.get(k)))
    if results.get("per_target"):
        _print_rows("per target", sorted(results["per_target"].items()))
    if results.get("folds"):
        _print_rows("per fold", [(f"fold {f.get('fold', i)}", f) for i, f in enumerate(results["folds"])])
        for i, fold in enumerate(results["folds"]):
            if fold.get("test_targets"):
                print(f"  fold {fold.get('fold', i)} test targets: {', '.join(fold['test_targets'])}")
    for key, value in results.get("summary", {}).items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    run = sub.add_parser("speed", allow_abbrev=False, help="seconds per ligand of predict_affinity on one CPU thread")
    run.add_argument("--targets", nargs="+", default=["all"], help="PLB targets (default: all)")
    run.add_argument("--model", default="default", help="model name or path (default: the shipped default)")
    run.add_argument("--members", type=int, default=5, help="ensemble size when timing random weights (default 5)")
    run.add_argument("--batch-size", type=int, default=32)
    run.add_argument("--repeats", type=int, default=3)
    run.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "affinity_speed.json"))
    cv = sub.add_parser("cv", allow_abbrev=False, help="print the cross-validation table")
    cv.add_argument("--results", default=str(REPO / "benchmarks" / "results" / "affinity_cv.json"))
    args = parser.parse_args()
    if args.part == "speed":
        speed(args)
        return 0
    return cross_validation(args)


if __name__ == "__main__":
    sys.exit(main())
