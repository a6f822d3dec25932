"""Preprocessing speed: protein PDB + SDF ligand → pocket BlockGraph, over the 247 PLB complexes.

Two pipelines, single process, one torch thread:

* cold: ``complex_from_files(protein.pdb, ligands.sdf, ligand_index=i)`` for every complex
  (the protein is parsed again each time);
* cached: the protein is read once per target with ``read_structure`` and each complex is
  ``complex_from_structure(receptor, ligands.sdf, ligand_index=i)`` (the SDF record is still
  read per complex). Per-complex times leave the ten receptor parses out; the throughput
  (complexes per second of a whole pass) includes them.

Pocket = receptor blocks with a heavy atom within 10 Å of a ligand heavy atom, hydrogens
dropped, one block per ligand heavy atom, two global blocks -- the reference setting of
``../shared/BENCHMARKS.md`` (69 ms/complex cold, 4.1 ms/complex cached).

Times are wall-clock medians per complex (the reference measure), with the process CPU time
beside them: on a shared machine the gap between the two shows how much the others took. The
JSON also keeps the median of the least disturbed pass.

Where the time goes: one more pass of each pipeline over the first ``--profile-complexes``
complexes runs under cProfile; the JSON keeps the functions with the most time of their own
(``profile``), and the command, commit and load average before and after (``meta``).

Usage: ``python benchmarks/preprocess.py [--repeats 3] [--profile-complexes 60] [--output benchmarks/results/preprocess.json]``
"""
from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import os
import platform
import pstats
import statistics
import time
from pathlib import Path

import torch

import geomol
from geomol.benchmarking.machine_load import load_average
from geomol.benchmarking.run_record import run_metadata
from geomol.data import complex_from_files, complex_from_structure, ligand_names, read_structure

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GEOMOL_SHARED_DATA", REPO.parent / "shared" / "data"))
REFERENCE_MS = {"cold": 69.0, "cached": 4.1}
REFERENCE_SIZE = {"blocks": 100.4, "atoms": 590}


def plb_complexes(root: Path) -> list[tuple[Path, Path, int]]:
    """(protein, sdf, ligand index) for every ligand of every PLB target."""
    jobs = []
    for target in sorted(p for p in root.iterdir() if (p / "01_protein/crd/protein.pdb").exists()):
        protein, sdf = target / "01_protein/crd/protein.pdb", target / "02_ligands/ligands.sdf"
        jobs += [(protein, sdf, i) for i in range(len(ligand_names(sdf)))]
    return jobs


def _timed(call, walls: list, cpus: list):
    """``call()``, appending its wall-clock and process CPU time (s) to the lists."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    walls.append(time.perf_counter() - wall)
    cpus.append(time.process_time() - cpu)
    return result


def run_cold(jobs) -> tuple[list[float], list[float], list]:
    walls, cpus = [], []
    graphs = [_timed(lambda: complex_from_files(protein, sdf, ligand_index=index), walls, cpus)
              for protein, sdf, index in jobs]
    return walls, cpus, graphs


def run_cached(jobs) -> tuple[list[float], list[float], list]:
    """Per-complex times, not counting the one receptor parse per target (the pass time does)."""
    walls, cpus, graphs, receptors = [], [], [], {}
    for protein, sdf, index in jobs:
        if protein not in receptors:
            receptors = {protein: read_structure(protein)}  # one target at a time, as a dataset would
        graphs.append(_timed(lambda: complex_from_structure(receptors[protein], sdf, ligand_index=index), walls, cpus))
    return walls, cpus, graphs


def profile_table(run, jobs, rows: int = 25) -> list[dict]:
    """The ``rows`` functions with the most own time in one ``run(jobs)`` under cProfile."""
    profiler = cProfile.Profile()
    profiler.runcall(run, jobs)
    stats = pstats.Stats(profiler).stats
    total = sum(v[2] for v in stats.values())
    table = sorted(stats.items(), key=lambda kv: -kv[1][2])[:rows]
    return [{"function": f"{Path(file).name}:{line}({name})", "calls": v[1], "own_s": round(v[2], 4),
             "own_share": round(v[2] / total, 4), "cumulative_s": round(v[3], 4)}
            for (file, line, name), v in table]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over all complexes per pipeline")
    parser.add_argument("--profile-complexes", type=int, default=60, help="complexes in the profiled pass")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks/results/preprocess.json")
    args = parser.parse_args()
    meta = run_metadata()
    torch.set_num_threads(1)
    jobs = plb_complexes(SHARED / "plb")
    run_cached(jobs[:20])  # warm-up: imports, caches, first allocations

    results = {}
    for name, run in (("cold", run_cold), ("cached", run_cached)):
        walls, cpus, passes, pass_medians = [], [], [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            pass_walls, pass_cpus, graphs = run(jobs)
            passes.append(time.perf_counter() - start)
            pass_medians.append(statistics.median(pass_walls))
            walls += pass_walls
            cpus += pass_cpus
        median_ms = statistics.median(walls) * 1e3
        results[name] = {
            "median_ms_per_complex": round(median_ms, 3),
            "mean_ms_per_complex": round(statistics.fmean(walls) * 1e3, 3),
            "median_cpu_ms_per_complex": round(statistics.median(cpus) * 1e3, 3),
            "best_pass_median_ms_per_complex": round(min(pass_medians) * 1e3, 3),
            "complexes_per_second": round(len(jobs) / statistics.median(passes), 1),
            "reference_ms_per_complex": REFERENCE_MS[name],
            "speedup_vs_reference": round(REFERENCE_MS[name] / median_ms, 2),
        }
    profiles = {name: profile_table(run, jobs[:args.profile_complexes])
                for name, run in (("cold", run_cold), ("cached", run_cached))}
    sizes = {"blocks": statistics.fmean(g.num_blocks for g in graphs),
             "atoms": statistics.fmean(g.num_atoms for g in graphs)}

    print(f"{len(jobs)} PLB complexes, {args.repeats} passes, 1 torch thread, {cpu_model()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'pipeline':<10}{'median ms':>11}{'mean ms':>10}{'CPU ms':>9}{'complexes/s':>13}{'reference ms':>14}"
          f"{'speed-up':>10}")
    for name, r in results.items():
        print(f"{name:<10}{r['median_ms_per_complex']:>11.2f}{r['mean_ms_per_complex']:>10.2f}"
              f"{r['median_cpu_ms_per_complex']:>9.2f}"
              f"{r['complexes_per_second']:>13.1f}{r['reference_ms_per_complex']:>14.1f}{r['speedup_vs_reference']:>9.1f}×")
    print(f"mean size: {sizes['blocks']:.1f} blocks, {sizes['atoms']:.1f} atoms "
          f"(reference {REFERENCE_SIZE['blocks']} blocks, {REFERENCE_SIZE['atoms']} atoms)")

    for name, table in profiles.items():
        print(f"\n{name}: functions with the most own time ({args.profile_complexes} complexes under cProfile)")
        for row in table[:12]:
            print(f"  {row['own_share']:>6.1%} {row['own_s']:>8.3f} s {row['calls']:>8} calls  {row['function']}")
    record = {
        "benchmark": "preprocess",
        "meta": {**meta, "load_average_after": load_average()},
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpu": cpu_model(), "logical_cores": os.cpu_count(), "platform": platform.platform(),
                    "load_average_1_5_15_min_at_end": [round(x, 2) for x in os.getloadavg()]},
        "versions": {"geomol": geomol.__version__ if hasattr(geomol, "__version__") else "unknown",
                     "python": platform.python_version(), "torch": torch.__version__,
                     "biopython": __import__("Bio").__version__, "rdkit": __import__("rdkit").__version__},
        "setup": {"complexes": len(jobs), "repeats": args.repeats, "torch_threads": 1, "pocket_cutoff_A": 10.0,
                  "hydrogens": "dropped", "ligand_blocks": "one per heavy atom"},
        "results": results,
        "mean_graph_size": {k: round(v, 2) for k, v in sizes.items()},
        "reference_mean_graph_size": REFERENCE_SIZE,
        "profile": profiles,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2) + "\n")
    print(f"written {args.output.relative_to(REPO) if args.output.is_relative_to(REPO) else args.output}")


if __name__ == "__main__":
    main()
