"""Ligand poses from SMILES (geomol.data.posing.poses) against the expert poses of the FEP+ benchmark.

For every series of ``../shared/data/fep_benchmark`` (``benchmark_metadata.csv`` order): the first
ligand of ``<scheme>_ligands.sdf`` is the reference; every other ligand is posed from its SMILES
(RDKit ``MolToSmiles`` of the expert pose, hydrogens removed) on it, with the series' protein
(heavy atoms) as receptor. Measured per ligand:

* heavy-atom RMSD to the expert pose, symmetry-aware and without re-alignment
  (``rdMolAlign.CalcRMS``), in Å; core atoms and core RMSD from the pose report. Some series list
  one molecule several times in alternative poses (rotamers, flipped rings); the RMSD to the
  nearest of them is reported too (``rmsd_nearest_alternative``);
* wall and CPU seconds of the posing (one thread; MCS + embedding + scoring, not the file reading).

With a model (default: the shipped default, ``models/get-plb``), each series' ligands are predicted
twice, from the expert and from the generated poses, and the per-series Spearman correlation of
predicted pK with the measured −ΔG is compared (series with ≥ 4 posed ligands).

Usage::

    python benchmarks/poses.py                       # all 83 series
    python benchmarks/poses.py --limit 10            # 10 series evenly spaced over the metadata
    python benchmarks/poses.py --series jacs_set/cdk2 jacs_set/ptp1b --no-affinity --parameter conformers=16
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import fields
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GEOMOL_SHARED_DATA", REPO.parent / "shared" / "data"))
FEP = SHARED / "fep_benchmark"


def _series(args) -> list[dict]:
    with open(FEP / "benchmark_metadata.csv", newline="") as handle:
        rows = [{"group": r["Group abbreviation"], "scheme": r["Input file naming scheme"], "protein": r["Protein"]}
                for r in csv.DictReader(handle)]
    if args.series:
        chosen = [r for r in rows if r["scheme"] in args.series or f"{r['group']}/{r['scheme']}" in args.series]
        missing = set(args.series) - {r["scheme"] for r in chosen} - {f"{r['group']}/{r['scheme']}" for r in chosen}
        if missing:
            sys.exit(f"unknown series: {sorted(missing)}")
        return chosen
    if args.limit and args.limit < len(rows):
        return [rows[i * len(rows) // args.limit] for i in range(args.limit)]
    return rows


def _heavy(mol):
    from rdkit import Chem

    return Chem.RemoveHs(mol, sanitize=False)


def _pose_series(row: dict, parameters) -> tuple[list[dict], list, list]:
    """Per-ligand rows, expert molecules and generated poses (None where posing failed)."""
    from rdkit import Chem
    from rdkit.Chem import rdMolAlign

    from geomol.data.io import read_ligands, read_structure
    from geomol.data.posing.poses import PoseTemplate

    folder = FEP / row["group"]
    experts = read_ligands(folder / f"{row['scheme']}_ligands.sdf")
    template = PoseTemplate(experts[0], read_structure(folder / f"{row['scheme']}_protein.pdb"), parameters)
    rows, poses = [], []
    smiles_of = [Chem.MolToSmiles(_heavy(m)) for m in experts]
    for index, expert in enumerate(experts[1:], start=1):
        smiles = smiles_of[index]
        wall, cpu = time.perf_counter(), time.process_time()
        posed = template.pose_all([(expert.GetProp("_Name"), smiles)])[0]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        rmsd = nearest = float("nan")
        if posed.ok:
            rmsd = rdMolAlign.CalcRMS(_heavy(posed.molecule), _heavy(expert), maxMatches=10000)
            nearest = min(rdMolAlign.CalcRMS(_heavy(posed.molecule), _heavy(other), maxMatches=10000)
                          for other, other_smiles in zip(experts[1:], smiles_of[1:]) if other_smiles == smiles)
        rows.append({"series": f"{row['group']}/{row['scheme']}", "ligand": index, "name": posed.name, "rmsd": rmsd,
                     "rmsd_nearest_alternative": nearest, "duplicates": smiles_of[1:].count(smiles),
                     "core_atoms": posed.core_atoms, "core_rmsd": posed.core_rmsd,
                     "heavy_atoms": expert.GetNumHeavyAtoms(), "seconds": wall, "cpu_seconds": cpu,
                     "error": posed.error})
        poses.append(posed.molecule)
    return rows, experts[1:], poses


def _spearman(model, row: dict, experts: list, poses: list) -> dict | None:
    """Per-series Spearman of predicted pK vs −ΔG from expert and from generated poses (same ligands)."""
    from scipy.stats import spearmanr

    from geomol.api import predict_affinity

    kept = [i for i, p in enumerate(poses) if p is not None and experts[i].HasProp("r_exp_dg")]
    if len(kept) < 4:
        return None
    receptor = FEP / row["group"] / f"{row['scheme']}_protein.pdb"
    measured = [-float(experts[i].GetProp("r_exp_dg")) for i in kept]
    out = {"series": f"{row['group']}/{row['scheme']}", "ligands": len(kept)}
    for kind, mols in (("expert", [experts[i] for i in kept]), ("generated", [poses[i] for i in kept])):
        predicted = [r.pK for r in predict_affinity(receptor, mols, model=model)]
        ok = [k for k, p in enumerate(predicted) if np.isfinite(p)]
        out[kind] = float(spearmanr([predicted[k] for k in ok], [measured[k] for k in ok])[0])
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _summary(rows: list[dict], correlations: list[dict]) -> dict:
    posed = [r for r in rows if not r["error"]]
    rmsd = np.array([r["rmsd"] for r in posed])
    summary = {"ligands": len(rows), "posed": len(posed), "failed": len(rows) - len(posed),
               "median_rmsd_A": float(np.median(rmsd)), "mean_rmsd_A": float(rmsd.mean()),
               "fraction_under_2A": float((rmsd < 2).mean()), "fraction_under_1A": float((rmsd < 1).mean()),
               "fraction_under_2A_nearest_alternative": float(np.mean([r["rmsd_nearest_alternative"] < 2 for r in posed])),
               "duplicated_ligands": sum(r["duplicates"] > 1 for r in rows),
               "median_core_atoms": float(np.median([r["core_atoms"] for r in posed])),
               "median_core_rmsd_A": float(np.median([r["core_rmsd"] for r in posed])),
               "mean_seconds_per_ligand": statistics.fmean(r["seconds"] for r in rows),
               "median_seconds_per_ligand": statistics.median(r["seconds"] for r in rows),
               "mean_cpu_seconds_per_ligand": statistics.fmean(r["cpu_seconds"] for r in rows)}
    usable = [c for c in correlations if np.isfinite(c["expert"]) and np.isfinite(c["generated"])]
    if usable:
        summary |= {"spearman_series": len(usable),
                    "mean_spearman_expert": statistics.fmean(c["expert"] for c in usable),
                    "mean_spearman_generated": statistics.fmean(c["generated"] for c in usable)}
    return summary


def _print(summary: dict, series: int) -> None:
    print(f"{series} series, {summary['ligands']} ligands posed from SMILES ({summary['failed']} failed)")
    print(f"{'median RMSD':>12}{'< 1 Å':>8}{'< 2 Å':>8}{'core atoms':>12}{'core RMSD':>11}{'s/ligand':>10}")
    print(f"{summary['median_rmsd_A']:>10.2f} Å{summary['fraction_under_1A']:>8.1%}{summary['fraction_under_2A']:>8.1%}"
          f"{summary['median_core_atoms']:>12.0f}{summary['median_core_rmsd_A']:>9.2f} Å"
          f"{summary['mean_seconds_per_ligand']:>10.3f}")
    print(f"CPU seconds per ligand {summary['mean_cpu_seconds_per_ligand']:.3f}; < 2 Å from the nearest expert pose of "
          f"the same molecule (series listing alternatives): {summary['fraction_under_2A_nearest_alternative']:.1%}")
    if "spearman_series" in summary:
        print(f"mean per-series Spearman over {summary['spearman_series']} series: expert poses "
              f"{summary['mean_spearman_expert']:.3f}, generated poses {summary['mean_spearman_generated']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", nargs="+", metavar="SCHEME", help="series by file naming scheme (cdk2: every "
                        "group's) or group/scheme (jacs_set/cdk2)")
    parser.add_argument("--limit", type=int, help="this many series, evenly spaced over the metadata order")
    parser.add_argument("--parameter", nargs="+", default=[], metavar="KEY=VALUE",
                        help="PoseParameters fields other than their defaults (e.g. conformers=16)")
    parser.add_argument("--model", default="default", help="affinity model for the Spearman comparison")
    parser.add_argument("--no-affinity", action="store_true", help="skip the affinity comparison")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "poses.json")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import rdkit
    import torch

    from geomol.data.posing.poses import PoseParameters
    from geomol.inference import load_model

    torch.set_num_threads(1)
    types = {f.name: f.type for f in fields(PoseParameters)}
    chosen = dict(item.split("=", 1) for item in args.parameter)
    parameters = PoseParameters(**{k: (int if types[k] == "int" else float)(v) for k, v in chosen.items()})
    model = None if args.no_affinity else load_model(args.model)
    rows, correlations, series = [], [], _series(args)
    start = time.perf_counter()
    for row in series:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # counted reader warnings of the prepared proteins
            series_rows, experts, poses = _pose_series(row, parameters)
            rows += series_rows
            correlation = _spearman(model, row, experts, poses) if model is not None else None
        if correlation:
            correlations.append(correlation)
        done = [r["rmsd"] for r in series_rows if not r["error"]]
        print(f"{row['group'] + '/' + row['scheme']:<50}{len(series_rows):>4} ligands  median RMSD "
              f"{np.median(done) if done else float('nan'):.2f} Å", flush=True)
    summary = _summary(rows, correlations)
    _print(summary, len(series))
    record = {"benchmark": "poses", "command": " ".join(["python", "benchmarks/poses.py", *sys.argv[1:]]),
              "commit": _commit(), "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "logical_cores": os.cpu_count(),
                          "load_average_1_5_15_min_at_end": [round(x, 2) for x in os.getloadavg()]},
              "threads": {"torch": torch.get_num_threads(), "rdkit_embedding": 1},
              "versions": {"python": platform.python_version(), "rdkit": rdkit.__version__, "torch": torch.__version__},
              "parameters": parameters.to_dict(), "model": None if model is None else args.model,
              "series": [f"{r['group']}/{r['scheme']}" for r in series], "wall_seconds": round(time.perf_counter() - start, 1),
              "summary": summary, "spearman_per_series": correlations, "ligands": rows}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1, default=float) + "\n")
    print(f"written {args.output.relative_to(REPO) if args.output.is_relative_to(REPO) else args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
