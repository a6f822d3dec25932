"""Speed, scaling and memory of ``geomol screen`` on libraries of analogues of the JNK1 series (FEP+ benchmark).

Libraries are enumerated (never downloaded): R-group swaps (:func:`geomol.screen.analogues.enumerate_analogues`)
on aromatic C–H positions of the series' ligands, one, two and three positions at a time (one and two give
50,834 analogues, the first of every library; three-site ones fill the 10⁵ library); the series' first
ligand is the reference pose, its receptor the pocket. Sections:

* ``throughput``: one library screened end to end (posing with the default parameters + the default
  model) with 1 and with 2 local workers; ligands/s (wall, the whole run; and steady: between the first
  and the last finished shard, without the cluster's start and the merge), per worker, the 1 → 2
  speed-up, CPU seconds per ligand by stage (from the workers), peak worker memory, and the driver's CPU
  seconds per ligand in the steady part (its Dask client and the local scheduler included): how many
  workers one driver can keep busy;
* ``profile``: one shard in this process under cProfile (after a warm-up shard): where the time goes;
* ``memory``: libraries of 10³, 10⁴ and 10⁵ ligands, each screened by 2 fresh workers for a fixed wall
  time (``--seconds``; the smallest may finish first), then interrupted: the workers' peak resident
  memory and the driver's, against library size.

    python benchmarks/screen.py all                       # every section
    python benchmarks/screen.py throughput --ligands 600
    python benchmarks/screen.py memory --sizes 1000 10000 100000 --seconds 600

Writes ``benchmarks/results/screen.json`` (each section with provenance: command, commit, versions,
threads, load). Sections already in it are kept; ``all`` skips them unless ``--force``. Run niced on a
shared machine: ``nice -n 10 env OMP_NUM_THREADS=1 python benchmarks/screen.py all``.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
RESULT = REPO / "benchmarks" / "results" / "screen.json"
SERIES = "jnk1_manual_flips"

PROFILE_STAGES = (  # (label, function names whose cumulative time it is)
    ("common core (RASCAL seed + rdFMCS)", ("rascal_seed", "find_mcs")),
    ("embedding (ETKDG with the core map)", ("_embed",)),
    ("pose choice (align, clashes)", ("_scored",)),
    ("complex graph and its input checks", ("checked_complex",)),
    ("  of which the graph (pocket, blocks, features)", ("_graph",)),
    ("model forward", ("predict",)),
    ("shard files (Parquet, SDF)", ("table_bytes", "gzip_bytes")),
)


def _series_files(work: Path) -> tuple[Path, Path, list[str]]:
    from rdkit import Chem

    folder = shared_data_dir() / "fep_benchmark" / "jacs_set"
    ligands = [m for m in Chem.SDMolSupplier(str(folder / f"{SERIES}_ligands.sdf"), removeHs=False) if m]
    reference = work / "reference.sdf"
    Chem.MolToMolFile(ligands[0], str(reference))
    return folder / f"{SERIES}_protein.pdb", reference, [Chem.MolToSmiles(Chem.RemoveHs(m)) for m in ligands]


def _library(work: Path, size: int, parents: list[str]) -> Path:
    from geomol.screen.analogues import enumerate_analogues, write_smiles_library

    path = work / f"analogues_{size}.smi.gz"
    if not path.exists():
        partial = path.with_suffix(".partial.gz")
        written = write_smiles_library(partial, enumerate_analogues(parents, max_sites=3, limit=size))
        if written < size:
            sys.exit(f"only {written} analogues could be enumerated")
        partial.rename(path)
    return path


def _per_ligand(summary: dict) -> dict:
    screened = max(1, summary["run"]["ligands_screened"])
    return {stage: seconds / screened for stage, seconds in summary["run"]["cpu_seconds_by_stage"].items()}


def throughput(args, work: Path) -> dict:
    from geomol.screen.run import screen_library
    from geomol.screen.settings import ScreenSettings

    receptor, reference, parents = _series_files(work)
    library = _library(work, args.ligands, parents)
    rows = []
    for workers in (1, 2):
        out = Path(tempfile.mkdtemp(prefix=f"screen_{workers}w_", dir=work))
        load = os.getloadavg()
        finished = []  # (time, driver CPU time, ligands) per shard: steady = without the cluster's start and the merge
        summary = screen_library(library, receptor, reference, out, ScreenSettings(shard_size=args.shard_size),
                                 workers=workers, quiet=True, plot=False,
                                 on_shard=lambda result: finished.append((time.monotonic(), time.process_time(),
                                                                          result.ligands)))
        run = summary["run"]
        steady_ligands = sum(n for *_, n in finished[1:])
        steady = steady_ligands / max(1e-9, finished[-1][0] - finished[0][0])
        driver = (finished[-1][1] - finished[0][1]) / max(1, steady_ligands)
        per_ligand = _per_ligand(summary)
        rows.append({"workers": workers, "ligands": summary["counts"]["ligands"], "scored": summary["counts"]["scored"],
                     "wall_seconds": run["wall_seconds"], "ligands_per_second": run["ligands_per_second"],
                     "steady_ligands_per_second": steady, "steady_ligands_per_second_per_worker": steady / workers,
                     "cpu_seconds_per_ligand": per_ligand, "cpu_seconds_per_ligand_total": sum(per_ligand.values()),
                     "ligands_per_cpu_second": 1 / max(1e-9, sum(per_ligand.values())),
                     "driver_cpu_seconds_per_ligand_steady": driver,
                     "workers_one_driver_keeps_busy": sum(per_ligand.values()) / max(1e-9, driver),
                     "peak_worker_rss_mb": run["peak_worker_rss_mb"], "load_average_before": load,
                     "load_average_after": os.getloadavg()})
        print(f"{workers} worker(s): {run['ligands_per_second']:.2f} ligands/s wall ({steady:.2f} steady), "
              f"{1 / max(1e-9, sum(per_ligand.values())):.1f} ligands per worker CPU second, "
              f"driver {1000 * driver:.2f} ms CPU per ligand (keeps {rows[-1]['workers_one_driver_keeps_busy']:.0f} "
              f"workers busy), peak worker {run['peak_worker_rss_mb']:.0f} MB, load {load[0]:.1f}", flush=True)
    speedup = rows[1]["ligands_per_second"] / rows[0]["ligands_per_second"]
    steady_speedup = rows[1]["steady_ligands_per_second"] / rows[0]["steady_ligands_per_second"]
    print(f"1 → 2 workers: {speedup:.2f}× end to end, {steady_speedup:.2f}× steady")
    return {"library": library.name, "shard_size": args.shard_size, "rows": rows, "speedup_1_to_2": speedup,
            "steady_speedup_1_to_2": steady_speedup}


def profile(args, work: Path) -> dict:
    import torch

    from geomol.inference.loading import load_model
    from geomol.screen.library import iter_shards
    from geomol.screen.settings import ScreenInputs, ScreenSettings, model_digest
    from geomol.screen.worker import score_shard

    torch.set_num_threads(1)
    receptor, reference, parents = _series_files(work)
    library = _library(work, args.ligands, parents)
    settings = ScreenSettings(shard_size=args.profile_ligands)
    inputs = replace(ScreenInputs.read(receptor, reference, settings),
                     model_digest=model_digest(load_model(settings.model)))
    shards = iter_shards(library, args.profile_ligands)
    score_shard(inputs, next(shards))  # warm-up: model, receptor and reference loaded once per worker
    shard = next(shards)
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    result = score_shard(inputs, shard)
    profiler.disable()
    cumulative = {}
    for (_, _, name), (_, _, _, cum, _) in pstats.Stats(profiler).stats.items():
        for label, names in PROFILE_STAGES:
            if any(name == n or name.endswith(f".{n}>") for n in names):  # a Python function, or RDKit's C++ one
                cumulative[label] = cumulative.get(label, 0.0) + cum
    whole = sum(result.seconds.values())
    rows = [{"stage": label, "cpu_seconds_per_ligand": cumulative.get(label, 0.0) / len(shard.entries),
             "fraction": cumulative.get(label, 0.0) / whole} for label, _ in PROFILE_STAGES]
    for row in rows:
        print(f"{row['stage']:45s} {1000 * row['cpu_seconds_per_ligand']:7.1f} ms/ligand  {100 * row['fraction']:5.1f} %")
    print(f"{'whole shard (worker CPU)':45s} {1000 * whole / len(shard.entries):7.1f} ms/ligand")
    return {"ligands": len(shard.entries), "cpu_seconds_per_ligand": whole / len(shard.entries),
            "by_stage_from_worker": {k: v / len(shard.entries) for k, v in result.seconds.items()}, "rows": rows}


def _stream(args) -> None:
    """One memory run (a subprocess): screen ``--library`` for ``--seconds``, then stop; print JSON."""
    from geomol.screen.run import screen_library
    from geomol.screen.settings import ScreenSettings

    receptor, reference, _ = _series_files(Path(args.work))
    started = time.monotonic()
    out = Path(tempfile.mkdtemp(prefix="screen_memory_", dir=args.work))

    def stop_after_time(result):
        if time.monotonic() - started > args.seconds:
            raise KeyboardInterrupt

    completed = True
    try:
        screen_library(args.library, receptor, reference, out, ScreenSettings(shard_size=args.shard_size),
                       workers=2, quiet=True, plot=False, on_shard=stop_after_time)
    except KeyboardInterrupt:
        completed = False
    records = [json.loads(line) for line in (out / "shards.jsonl").read_text().splitlines() if line.strip()]
    print(json.dumps({"completed": completed, "wall_seconds": time.monotonic() - started,
                      "ligands_screened": sum(r["ligands"] for r in records), "shards": len(records),
                      "peak_worker_rss_mb": max(r["peak_rss_mb"] for r in records),
                      "peak_rss_mb_by_worker": {w: max(r["peak_rss_mb"] for r in records if r["worker"] == w)
                                                for w in {r["worker"] for r in records}},
                      "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def memory(args, work: Path) -> dict:
    _, _, parents = _series_files(work)
    rows = []
    for size in args.sizes:
        library = _library(work, size, parents)
        done = subprocess.run([sys.executable, __file__, "_stream", "--library", str(library), "--work", str(work),
                               "--seconds", str(args.seconds), "--shard-size", str(args.shard_size)],
                              capture_output=True, text=True, check=True)
        row = {"library_ligands": size, **json.loads(done.stdout.strip().splitlines()[-1]),
               "load_average": os.getloadavg()}
        rows.append(row)
        print(f"{size:>7d} ligands: screened {row['ligands_screened']} in {row['wall_seconds']:.0f} s, peak worker "
              f"{row['peak_worker_rss_mb']:.0f} MB, driver {row['driver_peak_rss_mb']:.0f} MB", flush=True)
    return {"seconds": args.seconds, "shard_size": args.shard_size, "rows": rows}


SECTIONS = {"throughput": throughput, "profile": profile, "memory": memory}


def _save(path: Path, name: str, result: dict) -> None:
    record = json.loads(path.read_text()) if path.exists() else {"benchmark": "screen"}
    record[name] = {**result, "provenance": provenance()}
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("section", choices=[*SECTIONS, "all", "_stream"])
    parser.add_argument("--ligands", type=int, default=600, help="library size of throughput and profile")
    parser.add_argument("--profile-ligands", type=int, default=100)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--seconds", type=float, default=600.0, help="memory: wall seconds per library")
    parser.add_argument("--shard-size", type=int, default=100)
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "geomol-screen-benchmark"))
    parser.add_argument("--library", help=argparse.SUPPRESS)
    parser.add_argument("--force", action="store_true", help="redo sections already in the result file")
    parser.add_argument("--output", type=Path, default=RESULT, help="result JSON (default benchmarks/results/screen.json)")
    args = parser.parse_args()
    if args.section == "_stream":
        _stream(args)
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    done = json.loads(args.output.read_text()) if args.output.exists() else {}
    for name in (SECTIONS if args.section == "all" else [args.section]):
        if args.section == "all" and name in done and not args.force:
            print(f"{name}: already in {args.output.name} (--force to redo)")
            continue
        print(f"== {name}", flush=True)
        _save(args.output, name, SECTIONS[name](args, work))


if __name__ == "__main__":
    main()
