"""What `geomol simulate` made and how long it took: one table from the runs' summary JSONs.

Reads the summaries the generator writes beside its data (``md17_<molecule>.json`` of ``geomol simulate
molecule``, ``<run>/trajectory.json`` of ``geomol simulate protein``) and writes them, with the speed of each
run (ms per step, frames per CPU-thread hour, ns/day, the machine load the run recorded), to
``benchmarks/results/md_generation.json``. Runs still in progress (a ``*.work`` checkpoint and no summary)
are listed with the frames their checkpoint holds.

    python benchmarks/md_generation.py [--md17 md_data/md17] [--protein md_data/fkbp12]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]


def _load(summary: dict) -> list | None:
    prov = summary.get("provenance", {})
    return prov.get("load_average") or prov.get("load")


def molecule_rows(folder: Path) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("md17_*.json")):
        s = json.loads(path.read_text())
        ps = s["simulated_ps"]
        rows.append({"kind": "molecule", "name": s["molecule"], "atoms": s["atoms"], "frames": s["frames"],
                     "simulated_ns": round(ps * 1e-3, 6), "wall_seconds": s["wall_seconds"],
                     "ms_per_step": s["ms_per_step"], "frames_per_hour": s["frames_per_hour"],
                     "ns_per_day": round(ps * 1e-3 * 86400 / s["wall_seconds"], 3),
                     "mean_kinetic_temperature_K": s["mean_kinetic_temperature_K"], "engine": s["engine"],
                     "settings": s["settings"], "command": s["provenance"]["command"], "load_average": _load(s)})
    for work in sorted(folder.glob("md17_*.work")):
        if not (folder / f"{work.name[:-5]}.json").exists():
            rows.append({"kind": "molecule", "name": work.name[5:-5], "unfinished": True,
                         "checkpoint_frames": _checkpoint_frames(work)})
    return rows


def _checkpoint_frames(work: Path) -> int | None:
    for path in sorted(work.glob("*.npz")):
        with np.load(path) as saved:
            for key in ("frames", "done", "frame"):
                if key in saved.files:
                    return int(saved[key])
    return None


def protein_rows(folder: Path) -> list[dict]:
    rows = []
    for run in sorted(p for p in folder.glob("*") if p.is_dir()):
        summary = run / "trajectory.json"
        if not summary.exists():
            if (run / "trajectory.work").exists():
                rows.append({"kind": "protein", "name": f"{folder.name}/{run.name}", "unfinished": True,
                             "checkpoint_frames": _checkpoint_frames(run / "trajectory.work")})
            continue
        s = json.loads(summary.read_text())
        rows.append({"kind": "protein", "name": f"{folder.name}/{run.name}", "atoms": s["atoms"], "frames": s["frames"],
                     "simulated_ns": s["produced_ns"], "wall_seconds": s["wall_seconds"],
                     "equilibration_seconds": s.get("equilibration_seconds"), "ns_per_day": s["ns_per_day"],
                     "frames_per_hour": round(3600 * (s["frames"] - 1) / s["wall_seconds"], 1),
                     "ms_per_step": round(1e3 * s["wall_seconds"] / max(1, round(
                         s["produced_ns"] * 1e6 / s["settings"]["timestep_fs"])), 2),
                     "platform": s.get("platform"), "threads": s.get("threads"), "engine": s["engine"],
                     "settings": s["settings"], "command": s["provenance"]["command"], "load_average": _load(s)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.strip().splitlines()[0])
    parser.add_argument("--md17", type=Path, default=REPO / "md_data" / "md17")
    parser.add_argument("--protein", type=Path, nargs="*", default=[REPO / "md_data" / "fkbp12"])
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "md_generation.json")
    args = parser.parse_args(argv)
    rows = molecule_rows(args.md17) + [row for folder in args.protein for row in protein_rows(folder)]
    print(f"{'data':<22} {'atoms':>5} {'frames':>7} {'ns':>8} {'wall min':>8} {'ms/step':>8} {'frames/h':>9} "
          f"{'ns/day':>7}  load (1/5/15 min)")
    for r in rows:
        if r.get("unfinished"):
            print(f"{r['name']:<22} unfinished: {r['checkpoint_frames']} frames in its checkpoint")
            continue
        print(f"{r['name']:<22} {r['atoms']:>5} {r['frames']:>7} {r['simulated_ns']:>8.4f} {r['wall_seconds'] / 60:>8.1f} "
              f"{r['ms_per_step']:>8} {r['frames_per_hour']:>9} {r['ns_per_day']:>7}  {r['load_average']}")
    record = {"benchmark": "md_generation", "provenance": provenance(), "runs": rows,
              "note": "each run on one CPU thread of a shared 2-core machine (its recorded load average beside it)"}
    args.output.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written {args.output.relative_to(REPO) if args.output.is_relative_to(REPO) else args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
