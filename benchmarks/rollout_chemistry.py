"""Rollouts that keep chemistry: trajectory models beside the baselines on the same windows, and the metrics' speed.

``evaluate``: :func:`geomol.evaluate_rollouts` of one or more trajectory models on a held-out trajectory
(``--topology``, ``--trajectory``; saved at the models' frame interval, e.g. the independent FKBP12 run of
``configs/md/fkbp12.yaml``): S2S / S2T MSE, bond-length and angle errors, frames and windows with a broken
bond (> 0.3 Å), frames with a clash, for each model (and each model with the bond-restoring projection), no
motion, linear extrapolation and the reference MD::

    RUN="--topology md_data/fkbp12/seed2/topology.pqr --trajectory md_data/fkbp12/seed2/trajectory.dcd"
    python benchmarks/rollout_chemistry.py evaluate --model egno-fkbp12 $RUN --restore-bonds
    python benchmarks/rollout_chemistry.py evaluate --model EGNO=egno-fkbp12 --model EGNN=runs/.../best.ckpt \\
        $RUN --restore-bonds --name fkbp12_seed2
    python benchmarks/rollout_chemistry.py evaluate --model egno-fkbp12 $RUN --horizon 60 --stride 4 --name fkbp12_60

``speed``: time of the chemistry metrics on every atom of AdK (3,341 atoms with hydrogens, 1,656 heavy)
over ``--frames`` frames (the 98 frames of the trajectory repeated), one thread::

    python benchmarks/rollout_chemistry.py speed --frames 300

Each prints a table and writes ``benchmarks/results/rollout_chemistry_<name>.json`` (with provenance).
"""
from __future__ import annotations

import argparse
import json
import resource
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from geomol.provenance import provenance

RESULTS = Path(__file__).resolve().parent / "results"


def _adk_files() -> tuple[str, str]:
    from MDAnalysisTests.datafiles import DCD, PSF

    return PSF, DCD


def _models(specs: list[str]) -> dict[str, str]:
    """``NAME=REFERENCE`` or ``REFERENCE`` (named after itself) → {row name: model reference}."""
    models = {}
    for spec in specs:
        name, _, reference = spec.partition("=") if "=" in spec else (Path(spec).name, "", spec)
        models[name] = reference
    return models


def evaluate(args) -> dict:
    import geomol

    begin = time.perf_counter()
    table = geomol.evaluate_rollouts(_models(args.model), args.topology, args.trajectory, selection=args.selection,
                                     split=args.split, stride=args.stride, horizon=args.horizon,
                                     restore_bonds=args.restore_bonds, progress=True)
    seconds = time.perf_counter() - begin
    table.source = Path(table.source).name  # no folder of this machine in a result file
    print(f"{len(table.starts)} windows (starts {table.starts[0]} … {table.starts[-1]}), predicted frames "
          f"s + {table.offsets}; {table.bonds}; {seconds:.0f} s\n")
    print(table.to_markdown())
    print(f"\nbond-length error by kind of bond (median / max Å, frames with a broken bond):\n\n"
          f"{table.bond_kinds_markdown()}")
    return {"table": table.to_dict(), "markdown": table.to_markdown(),
            "bond_kinds_markdown": table.bond_kinds_markdown(), "seconds": seconds}


def speed(args) -> dict:
    from geomol.data.chemistry.covalent_graph import CovalentGraph
    from geomol.data.io.trajectory import open_selection
    from geomol.data.chemistry.trajectory import trajectory_chemistry

    universe, atoms = open_selection(*_adk_files(), "all")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frames = np.stack([atoms.positions.astype(np.float64) for _ in universe.trajectory])
    frames = np.concatenate([frames] * -(-args.frames // len(frames)))[:args.frames]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    begin = time.perf_counter()
    graph = CovalentGraph.of_selection(atoms, frames[0])
    graph_seconds = time.perf_counter() - begin
    runs = []
    for _ in range(args.repeats):
        begin = time.perf_counter()
        measured = trajectory_chemistry(frames, graph, frames[0])
        runs.append(time.perf_counter() - begin)
    rss_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    result = {"atoms": graph.num_atoms, "heavy_atoms": int(graph.heavy.sum()), "bonds": len(graph.bonds),
              "angles": len(graph.angles), "frames": len(frames), "graph_seconds": graph_seconds,
              "metrics_seconds": runs, "ms_per_frame": 1000 * min(runs) / len(frames),
              "peak_rss_growth_MB": rss_growth_mb, "clash_fraction": measured.summary()["clash_fraction"]}
    print("| atoms (heavy) | bonds | angles | frames | covalent graph (s) | metrics, best of "
          f"{args.repeats} (s) | ms per frame | peak RSS growth (MB) |\n|---|---|---|---|---|---|---|---|\n"
          f"| {result['atoms']} ({result['heavy_atoms']}) | {result['bonds']} | {result['angles']} | "
          f"{result['frames']} | {graph_seconds:.3f} | {min(runs):.2f} | {result['ms_per_frame']:.1f} | "
          f"{rss_growth_mb:.0f} |")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("evaluate", allow_abbrev=False,
                              help="models and baselines on the windows of a held-out trajectory")
    run.add_argument("--model", action="append", required=True, metavar="[NAME=]MODEL",
                     help="a trajectory model (shipped name, directory or checkpoint); repeat for several")
    run.add_argument("--topology", required=True, help="held-out trajectory's topology (with partial charges)")
    run.add_argument("--trajectory", required=True, help="its trajectory, at the models' frame interval")
    run.add_argument("--selection", help="atoms (default: the first model's training selection)")
    run.add_argument("--split", choices=("train", "valid", "test"),
                     help="starts of this part of the chronological split (default: every start that fits)")
    run.add_argument("--stride", type=int, default=1, help="frames between starts (default 1)")
    run.add_argument("--horizon", type=int, help="frames after each start (default: the first model's o_P)")
    run.add_argument("--restore-bonds", action="store_true", help="also each model with the bond-restoring projection")
    run.add_argument("--name", help="result name (default: the first model's)")
    timing = commands.add_parser("speed", allow_abbrev=False,
                                 help="time the chemistry metrics on all 3,341 atoms of AdK")
    timing.add_argument("--frames", type=int, default=300)
    timing.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = evaluate(args) if args.command == "evaluate" else speed(args)
    name = "speed" if args.command == "speed" else (args.name or next(iter(_models(args.model))))
    out = RESULTS / f"rollout_chemistry_{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**result, "provenance": provenance()}, indent=1) + "\n", encoding="utf-8")
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
