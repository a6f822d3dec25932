"""GET speed and memory: forward+backward of GETAffinity (LBA configuration) on PLB pockets.

Measures, each configuration in a fresh subprocess with one intra-op thread (so that peak RSS,
``ru_maxrss``, is comparable between configurations):

* ``batch16``: training steps (forward + backward, train mode) on batches of 16 PLB pockets
  (10 Å, no hydrogens, one block per ligand heavy atom), several distinct batches, median;
* ``forward16``: inference (eval, no grad) on the same batches;
* the official scaling rows of ``../shared/BENCHMARKS.md``: cdk2 with its first ligand, pockets
  at 10, 15, 20, 30 Å and the whole protein;
* a size series of 100 … 3200 blocks per complex: the blocks nearest to the cdk2 ligand, taken
  from copies of the cdk2 receptor tiled 70 Å apart once one copy is not enough.

Wall and CPU (process) times are medians after warm-up; other jobs share the machine, so CPU
time is the steadier figure. Prints a table and writes JSON (default
``benchmarks/results/get_speed.json``). Run from the repository root:

    python benchmarks/get_speed.py            # full run, several minutes
    python benchmarks/get_speed.py --quick    # fewer steps and sizes
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
SHARED = shared_data_dir()
PLB = SHARED / "plb"
TARGETS = ("cdk2", "cmet", "eg5", "hif2a", "pde2", "pfkfb3", "ptp1b", "syk", "thrombin", "tnks2")

# ../shared/BENCHMARKS.md: the official AffinityPredictor on this machine class (1 thread).
OFFICIAL = {
    "batch16": {"seconds": 12.2, "rss_gb": 5.4},
    "forward16": {"seconds": 5.15},  # "4.8–5.5 s"
    "cutoff_10": {"blocks": 87, "edges": 1706, "pairs": 18783, "seconds": 0.30, "edge_seconds": 0.016, "rss_gb": 0.66},
    "cutoff_15": {"blocks": 144, "edges": 2846, "pairs": 36085, "seconds": 0.58, "edge_seconds": 0.05, "rss_gb": 1.0},
    "cutoff_20": {"blocks": 221, "edges": 4386, "pairs": 59515, "seconds": 1.02, "edge_seconds": 0.14, "rss_gb": 1.5},
    "cutoff_30": {"blocks": 371, "edges": 7386, "pairs": 104772, "seconds": 2.0, "edge_seconds": 0.63, "rss_gb": 2.5},
    "cutoff_whole": {"blocks": 585, "edges": 11666, "pairs": 168314, "seconds": 5.6, "edge_seconds": 3.1, "rss_gb": 4.4},
}
SIZES = (100, 200, 400, 800, 1600, 3200)


# ---------------------------------------------------------------------- inputs
def _receptor(target):
    from geomol.data import read_structure
    return read_structure(PLB / target / "01_protein/crd/protein.pdb")


def plb_batches(n_batches: int, batch_size: int = 16, seed: int = 0):
    """Distinct batches of PLB pockets, drawn without replacement from all 247 complexes."""
    from geomol.data import complex_from_structure, ligand_names
    pool = [(t, i) for t in TARGETS for i in range(len(ligand_names(PLB / t / "02_ligands/ligands.sdf")))]
    pick = np.random.default_rng(seed).permutation(len(pool))[: n_batches * batch_size]
    receptors = {}
    graphs = []
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


# ---------------------------------------------------------------------- one configuration
def _graph_stats(model, batch):
    """Sizes, and the time to build block edges and atom pairs (median of 3)."""
    edge_times, pair_times = [], []
    for _ in range(3):
        start = time.perf_counter()
        inputs = model.prepare(batch)
        edge_times.append(time.perf_counter() - start)
        pairs = model.encoder.atom_pairs(inputs.Z, batch.block_id, inputs.edges, inputs.block_batch.numel())
        pair_times.append(time.perf_counter() - start - edge_times[-1])
    return {"blocks": batch.num_blocks, "atoms": batch.num_atoms, "edges": int(inputs.edges.size(1)),
            "pairs": pairs.num_pairs, "edge_seconds": statistics.median(edge_times),
            "pair_seconds": statistics.median(pair_times)}


def run_config(name: str, quick: bool) -> dict:
    from torch_geometric.data import Batch
    from geomol.models.get import GETAffinity
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if name in ("batch16", "forward16"):
        batches = [Batch.from_data_list(b) for b in plb_batches(2 if quick else 4)]
        steps, warmup = (4, 1) if quick else (8, 2)
    elif name.startswith("cutoff_"):
        tag = name.split("_")[1]
        batches = [Batch.from_data_list([cutoff_complex(None if tag == "whole" else float(tag))])]
        steps, warmup = (2, 1) if quick else (5, 2)
    else:
        batches = [Batch.from_data_list([sized_complex(int(name.split("_")[1]))])]
        steps, warmup = (2, 1) if quick else (3, 1)
    rss_inputs = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    model = GETAffinity()
    train = name != "forward16"
    model.train(train)
    wall, cpu = [], []
    for step in range(warmup + steps):
        batch = batches[step % len(batches)]
        w0, c0 = time.perf_counter(), time.process_time()
        if train:
            pk = model(batch)
            GETAffinity.loss(pk, torch.full_like(pk, 6.0)).backward()
        else:
            with torch.no_grad():
                model(batch)
        if step >= warmup:
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
    stats = [_graph_stats(model, b) for b in batches]
    mean = {k: float(np.mean([s[k] for s in stats])) for k in stats[0]}
    return {"name": name, "seconds": statistics.median(wall), "cpu_seconds": statistics.median(cpu),
            "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, "rss_inputs_gb": rss_inputs,
            "steps": steps, "complexes": batches[0].num_graphs, **mean}


# ---------------------------------------------------------------------- driver
def _spawn(name: str, quick: bool) -> dict:
    cmd = [sys.executable, __file__, "--worker", name] + (["--quick"] if quick else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(r):
    ref = OFFICIAL.get(r["name"], {})
    speed_cpu = f"{ref['seconds'] / r['cpu_seconds']:.2f}x" if "seconds" in ref else "–"
    speed_wall = f"{ref['seconds'] / r['seconds']:.2f}x" if "seconds" in ref else "–"
    mem = f"{ref['rss_gb'] / r['rss_gb']:.2f}x" if "rss_gb" in ref else "–"
    per_edge = 1e6 * r["cpu_seconds"] / r["edges"]
    return (f"{r['name']:<13}{r['blocks']:>7.0f}{r['atoms']:>7.0f}{r['edges']:>7.0f}{r['pairs']:>8.0f}"
            f"{r['seconds']:>8.3f}{r['cpu_seconds']:>8.3f}{r['edge_seconds']:>7.3f}{per_edge:>8.1f}"
            f"{r['rss_gb']:>7.2f}{speed_cpu:>8}{speed_wall:>8}{mem:>7}")


HEADER = (f"{'config':<13}{'blocks':>7}{'atoms':>7}{'edges':>7}{'pairs':>8}{'wall s':>8}{'cpu s':>8}"
          f"{'edge s':>7}{'µs/edge':>8}{'RSS GB':>7}{'x(cpu)':>8}{'x(wall)':>8}{'mem':>7}")
FOOTER = ("blocks … pairs: per step (batch16: 16 complexes); µs/edge: CPU time per block edge; x(cpu), "
          "x(wall): official seconds / ours (CPU or wall time; the official figures are wall times measured "
          "with one competing job on 2 cores); mem: official peak RSS / ours")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and sizes")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/get_speed.json"))
    parser.add_argument("--only", nargs="*", help="configuration names to run")
    parser.add_argument("--show", help="print the table of an earlier JSON result and exit")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run_config(args.worker, args.quick)))
        return
    if args.show:
        print(HEADER)
        for r in json.loads(Path(args.show).read_text())["results"]:
            print(_row(r))
        print(FOOTER)
        return
    sizes = SIZES[:4] if args.quick else SIZES
    names = ["batch16", "forward16"] + [f"cutoff_{c}" for c in ("10", "15", "20", "30", "whole")] + \
        [f"blocks_{n}" for n in sizes]
    names = [n for n in names if not args.only or n in args.only]
    print(HEADER)
    results = []
    for name in names:
        results.append(_spawn(name, args.quick))
        print(_row(results[-1]), flush=True)
    print(FOOTER)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    meta = {"torch": torch.__version__, "threads": 1, "date": time.strftime("%Y-%m-%d"),
            "official": OFFICIAL, "quick": args.quick, "provenance": provenance()}
    Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
