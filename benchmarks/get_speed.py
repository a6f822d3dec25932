"""GET speed and memory: the official AffinityPredictor and geomol's GETAffinity side by side.

Same inputs (PLB complexes built by geomol, converted to the official tensors), same weights
(the official state dict loaded into ours with ``load_official_state_dict``), LBA configuration,
one intra-op thread. Cases:

* ``batch16``: training steps (forward + backward, train mode) on batches of 16 PLB 10 Å pockets
  (no hydrogens, one block per ligand heavy atom), several distinct batches;
* ``forward16``: inference (eval, no grad) on the same batches;
* ``cutoff_*``: fwd+bwd on cdk2 with its first ligand, pockets at 10, 15, 20, 30 Å and the whole protein;
* ``blocks_*`` (geomol only): a size series of 100 … 3200 blocks (cdk2 receptor copies tiled 70 Å
  apart), to check that the cost per block edge stays flat.

Times are medians after a warm-up, the two implementations called alternately in one process
(``--threads``: torch threads, default 1); ``--load none cpu memory`` runs every round of steps once with no
added load and once beside each stressor of :mod:`geomol.benchmarking.stressors` (on another core), so that the
conditions are compared within one run. Every row records the load it ran under
(:mod:`geomol.benchmarking.machine_load`: load average, busy CPUs, steal, the busiest other processes), each step's
wall, CPU, kernel seconds, page faults and preemptions, and geomol's seconds inside its compiled loops;
peak RSS is measured in a fresh process per implementation running the same steps
(warm-up + 2). The official
code (github.com/THUNLP-MT/GET, which needs torch_scatter) is taken from ``--official``, else
``$GEOMOL_OFFICIAL_GET``, else ``../shared/reference/official_get``; without it the official
columns read "skipped". Prints a table and writes ``benchmarks/results/get_speed.json``
(with command, commit, versions, threads and the load average before and after). From the
repository root:

    python benchmarks/get_speed.py                    # everything, ~15 minutes
    python benchmarks/get_speed.py --only batch16 cutoff_whole --steps 3
    python benchmarks/get_speed.py --only batch16 --batches 2 --steps 4 --load none cpu memory
    python benchmarks/get_speed.py --profile batch16  # torch.profiler table of one geomol step
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from geomol.benchmarking.edge_scaling import edge_scaling, edge_scaling_line
from geomol.benchmarking.interleaved import interleaved_runs, load_line, product_gflop
from geomol.benchmarking.run_record import (official_checkout, peak_rss_gb, run_metadata, run_worker,
                                            start_step_memory, step_memory_gb, write_result)
from geomol.benchmarking.stressors import KINDS

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GEOMOL_SHARED_DATA", REPO.parent / "shared" / "data"))
PLB = SHARED / "plb"
TARGETS = ("cdk2", "cmet", "eg5", "hif2a", "pde2", "pfkfb3", "ptp1b", "syk", "thrombin", "tnks2")
SIZES = (100, 200, 400, 800, 1600, 3200)
CASES = ["batch16", "forward16"] + [f"cutoff_{c}" for c in ("10", "15", "20", "30", "whole")] + \
    [f"blocks_{n}" for n in SIZES]
RESULTS = REPO / "benchmarks" / "results" / "get_speed.json"
RSS_STEPS = 2  # timed steps after warm-up in the peak-memory runs


# ---------------------------------------------------------------------- inputs
def _receptor(target):
    from geomol.data import read_structure
    return read_structure(PLB / target / "01_protein/crd/protein.pdb")


def plb_batches(n_batches: int, batch_size: int = 16, seed: int = 0):
    """Distinct batches of PLB pockets, drawn without replacement from all 247 complexes."""
    from geomol.data import complex_from_structure, ligand_names
    pool = [(t, i) for t in TARGETS for i in range(len(ligand_names(PLB / t / "02_ligands/ligands.sdf")))]
    pick = np.random.default_rng(seed).permutation(len(pool))[: n_batches * batch_size]
    receptors, graphs = {}, []
    for k in pick:
        target, index = pool[k]
        receptors.setdefault(target, _receptor(target))
        graphs.append(complex_from_structure(receptors[target], PLB / target / "02_ligands/ligands.sdf",
                                             ligand_index=index))
    return [graphs[b * batch_size:(b + 1) * batch_size] for b in range(n_batches)]


def cutoff_complex(cutoff: float | None):
    """cdk2 and its first ligand, pocket at ``cutoff`` Å (None: the whole protein)."""
    from geomol.data import complex_from_structure
    return complex_from_structure(_receptor("cdk2"), PLB / "cdk2/02_ligands/ligands.sdf",
                                  pocket_cutoff=1e9 if cutoff is None else cutoff)


def sized_complex(n_blocks: int):
    """cdk2 ligand + the ``n_blocks − ligand − 2`` receptor blocks nearest to it (tiled copies)."""
    from geomol.data import BlockGraph, ligand_blocks, pocket_blocks, read_ligand
    ligand = ligand_blocks(read_ligand(PLB / "cdk2/02_ligands/ligands.sdf", 0))
    receptor = pocket_blocks(_receptor("cdk2"), ligand, 1e9)
    copies = int(np.ceil(np.sqrt(n_blocks / len(receptor) * 1.5)))
    shifts = [np.array([70.0 * a, 70.0 * b, 0.0]) for a in range(copies) for b in range(copies)]
    tiled = [dataclasses.replace(blk, coords=blk.coords + s) for s in shifts for blk in receptor]
    lig_xyz = np.concatenate([b.coords for b in ligand])
    dist = [np.linalg.norm(b.coords[:, None] - lig_xyz[None], axis=-1).min() for b in tiled]
    keep = np.sort(np.argsort(dist)[: n_blocks - len(ligand) - 2])
    return BlockGraph.from_blocks([[tiled[i] for i in keep], ligand], name=f"cdk2x{len(shifts)}:{n_blocks}")


def case_inputs(name: str, n_batches: int):
    """The batches (PyG Batch of BlockGraphs) of one case."""
    from torch_geometric.data import Batch
    if name in ("batch16", "forward16"):
        return [Batch.from_data_list(b) for b in plb_batches(n_batches)]
    if name.startswith("cutoff_"):
        tag = name.split("_")[1]
        return [Batch.from_data_list([cutoff_complex(None if tag == "whole" else float(tag))])]
    return [Batch.from_data_list([sized_complex(int(name.split("_")[1]))])]


def official_inputs(g) -> dict:
    """The official ``AffinityPredictor.forward`` keywords for a batched BlockGraph ``g``."""
    return {"Z": g.X.float().view(-1, 1, 3), "B": g.B, "A": g.A, "atom_positions": g.atom_pos,
            "block_lengths": g.block_len, "lengths": torch.bincount(g.block_batch), "segment_ids": g.segment}


# ---------------------------------------------------------------------- models and steps
def build_models(official_path: str | None, which: tuple[str, ...]):
    """{"ours": GETAffinity, "official": AffinityPredictor} with the same (official) weights."""
    from geomol.models.get import GETAffinity, load_official_state_dict
    torch.manual_seed(0)
    models = {}
    if "ours" in which:
        models["ours"] = GETAffinity()
    if official_path is not None:
        sys.path.insert(0, official_path)
        from models.affinity_predictor import AffinityPredictor  # the official code, not geomol
        official = AffinityPredictor("GET", 64, 1, n_rbf=32, cutoff=7.0, radial_size=32, edge_size=64,
                                     k_neighbors=9, n_layers=3, n_head=4)
        if "ours" in models:
            load_official_state_dict(models["ours"], official.state_dict())
        if "official" in which:
            models["official"] = official
    return models


def step_function(impl: str, model, batches, train: bool):
    """fn(step): one training step (fwd+bwd, MSE to pK 6) or one no-grad forward on batch step % n."""
    from geomol.models.get import GETAffinity
    model.train(train)
    if impl == "official":
        inputs = [official_inputs(b) for b in batches]
    targets = [torch.full((b.num_graphs,), 6.0) for b in batches]

    def fn(step):
        k = step % len(batches)
        if not train:
            with torch.no_grad():
                return model(batches[k]) if impl == "ours" else model.infer({"X": inputs[k]["Z"], **inputs[k]})
        model.zero_grad(set_to_none=True)
        if impl == "ours":
            GETAffinity.loss(model(batches[k]), targets[k]).backward()
        else:
            model(**inputs[k], label=targets[k]).backward()
    return fn


def graph_stats(model, batch) -> dict:
    """Sizes per step, and geomol's time to build block edges and their atom pairs (median of 3)."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        inputs = model.prepare(batch)
        times.append(time.perf_counter() - start)
    return {"blocks": batch.num_blocks, "atoms": batch.num_atoms, "edges": int(inputs.edges.size(1)),
            "pairs": inputs.pairs.num_pairs, "ours_edge_seconds": statistics.median(times)}


def parity(models, batches) -> float:
    """Relative difference of the predicted pK (eval, first batch): ours vs official."""
    fns = {impl: step_function(impl, m, batches[:1], train=False) for impl, m in models.items()}
    ours, ref = fns["ours"](0), fns["official"](0)
    return float((ours.double() - ref.double()).norm() / ref.double().norm())


def worker(name: str, mode: str, official_path: str | None, steps: int, n_batches: int, threads: int = 1,
           loads: tuple[str, ...] = ("none",)) -> dict:
    """mode "time": alternate medians of both sides under each of ``loads``
    (:func:`geomol.benchmarking.interleaved.interleaved_runs`; {"loads": {load: medians}} beside the figures that do
    not depend on the load); "rss:<impl>": peak RSS of one side alone."""
    torch.set_num_threads(threads)
    batches = case_inputs(name, n_batches)
    train = name != "forward16"
    which = ("ours", "official") if mode == "time" else (mode[4:],)
    models = build_models(official_path if "official" in which else None, which)
    fns = {impl: step_function(impl, m, batches, train) for impl, m in models.items()}
    warmup = 1
    if mode != "time":  # both sides run the same steps: the allocator's peak grows over the first ones
        baseline = start_step_memory()
        for step in range(warmup + min(steps, RSS_STEPS)):
            fns[mode[4:]](step)
        return {f"{mode[4:]}_rss_gb": peak_rss_gb(), f"{mode[4:]}_step_gb": step_memory_gb(baseline)}
    result = {"loads": interleaved_runs(fns, steps, warmup, loads), **product_gflop(fns)}
    if "official" in models and not name.startswith("blocks_"):
        result["rel_diff_pk"] = parity(models, batches)
    stats = [graph_stats(models["ours"], b) for b in batches]
    return {**result, **{k: float(np.mean([s[k] for s in stats])) for k in stats[0]}}


def profile(name: str, steps: int, rows: int = 40) -> str:
    """torch.profiler table (self CPU time) of geomol's steps on one case."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    torch.set_num_threads(1)
    batches = case_inputs(name, 1)
    fn = step_function("ours", build_models(None, ("ours",))["ours"], batches, name != "forward16")
    fn(0)
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for step in range(steps):
            fn(step)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


# ---------------------------------------------------------------------- driver
def _fmt(value, spec=".2f", suffix=""):
    return "skipped" if value is None else format(value, spec) + suffix


def _ratio(row: dict, key: str, ours_key: str | None = None):
    off, ours = row.get(f"official_{key}"), row.get(f"ours_{ours_key or key}")
    return None if off is None or ours is None else off / ours


HEADER = (f"{'case':<16}{'blocks':>7}{'atoms':>7}{'edges':>7}{'pairs':>8} | {'official s':>10}{'geomol s':>9}"
          f"{'ratio':>8}{'cpu ratio':>10}{'work':>8} | {'RSS official':>12}{'geomol':>7}{'ratio':>8} | "
          f"{'step GB off.':>12}{'geomol':>7}{'ratio':>8} | {'edge s':>7}{'µs/edge':>8}{'Δ pK':>9}")


def row_line(r: dict) -> str:
    ours_cpu = r.get("ours_cpu_seconds")
    per_edge = 1e6 * ours_cpu / r["edges"] if ours_cpu and r.get("edges") else None
    label = r["case"] + ("" if r.get("load_kind", "none") == "none" else f"+{r['load_kind']}")
    return (f"{label:<16}{r.get('blocks', 0):>7.0f}{r.get('atoms', 0):>7.0f}{r.get('edges', 0):>7.0f}"
            f"{r.get('pairs', 0):>8.0f} | {_fmt(r.get('official_seconds'), '.3f'):>10}"
            f"{_fmt(r.get('ours_seconds'), '.3f'):>9}{_fmt(_ratio(r, 'seconds'), '.2f', 'x'):>8}"
            f"{_fmt(_ratio(r, 'cpu_seconds'), '.2f', 'x'):>10}{_fmt(_ratio(r, 'product_gflop'), '.2f', 'x'):>8} | "
            f"{_fmt(r.get('official_rss_gb')):>12}"
            f"{_fmt(r.get('ours_rss_gb')):>7}{_fmt(_ratio(r, 'rss_gb'), '.2f', 'x'):>8} | "
            f"{_fmt(r.get('official_step_gb'), '.3f'):>12}{_fmt(r.get('ours_step_gb'), '.3f'):>7}"
            f"{_fmt(_ratio(r, 'step_gb'), '.2f', 'x'):>8} | "
            f"{_fmt(r.get('ours_edge_seconds'), '.3f'):>7}{_fmt(per_edge, '.1f'):>8}"
            f"{_fmt(r.get('rel_diff_pk'), '.1e'):>9}" + (f"  {r['error']}" if "error" in r else ""))


FOOTER = ("per step (batch16/forward16: 16 complexes); seconds: wall medians, both sides alternated in one "
          "process, 1 thread; ratio, cpu ratio: official / geomol in wall and in CPU time (steadier on a shared "
          "machine); work: official / geomol in the arithmetic of the matrix products (GFLOP counted by "
          "torch.profiler, one step each), the speed-up that doing less work gives by itself; RSS: peak GB, each "
          "side alone in a fresh process after the same steps; step GB: the part of "
          "that peak reached during the steps, above the resident memory just before them (interpreter, libraries, "
          "model and inputs excluded); edge s: geomol's block-edge building; µs/edge: geomol's CPU time per block "
          "edge; Δ pK: relative difference of the "
          "predicted pK (eval) between the two")


def main(argv=None):
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--official", help="checkout of the official GET code (default: $GEOMOL_OFFICIAL_GET "
                                           "or ../shared/reference/official_get)")
    parser.add_argument("--only", nargs="*", choices=CASES, help="cases to run")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per case after warm-up")
    parser.add_argument("--batches", type=int, default=4, help="distinct batches of 16 (batch16, forward16)")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--load", nargs="+", choices=("none",) + tuple(KINDS), default=["none"],
                        help="controlled load, each in turn within every round of steps: none, or a stressor "
                             "process on another core (cpu: CPU-bound; memory: streams through main memory)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the measured steps (default 1)")
    parser.add_argument("--profile", choices=CASES, help="print a torch.profiler table of geomol on one case")
    parser.add_argument("--show", help="print the table of an earlier JSON result and exit")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="time", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    official = official_checkout(args.official, "GEOMOL_OFFICIAL_GET", "official_get")
    if args.worker:
        print(json.dumps(worker(args.worker, args.mode, official and str(official), args.steps, args.batches,
                                args.threads, tuple(args.load))))
        return
    if args.profile:
        print(profile(args.profile, args.steps))
        return
    if args.show:
        rows = json.loads(Path(args.show).read_text())["rows"]
        print(HEADER + "\n" + "\n".join(row_line(r) for r in rows) + "\n" + edge_scaling_line(edge_scaling(rows)))
        print("\n".join(f"{r['case']:<16}{load_line(r)}" for r in rows if "load" in r))
        return
    official_shown = official and (official.relative_to(REPO.parent) if official.is_relative_to(REPO.parent) else official)
    meta = {**run_metadata(args.threads), "official": str(official_shown) if official else None,
            "steps": args.steps, "batches": args.batches, "loads": args.load}
    print(f"official code: {official or 'not found, official columns skipped'}; load {meta['load_average_before']}")
    print(HEADER + "\n" + "-" * len(HEADER))
    rows = []
    for case in args.only or CASES:
        flags = ["--worker", case, "--steps", str(args.steps), "--batches", str(args.batches), "--threads",
                 str(args.threads), "--load", *args.load]
        flags += ["--official", str(official)] if official else []
        with_official = official is not None and not case.startswith("blocks_")
        timed = run_worker(__file__, flags + (["--mode", "time"] if with_official else
                                              ["--mode", "time", "--official", "/nonexistent"]))
        memory = run_worker(__file__, flags + ["--mode", "rss:ours"])
        if with_official:
            memory.update(run_worker(__file__, flags + ["--mode", "rss:official"]))
        for kind, figures in timed.pop("loads", {"none": {}}).items():
            rows.append({"case": case, "load_kind": kind, **timed, **figures, **memory})
            print(row_line(rows[-1]), flush=True)
    scaling = edge_scaling([r for r in rows if r["load_kind"] == args.load[0]])
    print(edge_scaling_line(scaling))
    print(FOOTER)
    print("\nload during each case (medians of the steps):")
    for row in rows:
        print(f"{row['case']:<16}{load_line(row)}")
    write_result(Path(args.out), meta, rows, edge_scaling=scaling)


if __name__ == "__main__":
    main()
