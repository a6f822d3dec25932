"""EGNO speed and memory: ours against the official implementation on the same inputs and weights.

Configurations (as in ``../shared/BENCHMARKS.md``): N-body (batch 100 × 5 particles, 4 layers,
hidden 64, P 5), Mocap Run (batch 12 × 31 joints, 6 layers, hidden 128), one radius graph of mean
degree 16 with 100 … 10,000 nodes (N-body architecture), and P = 1 … 16 on the 1,000-node graph.
Both implementations run alternately in one process with ``torch.set_num_threads(1)``: median wall
and CPU time of forward+backward (MSE to a fixed target) and of forward alone (no grad) after a
warm-up step; peak RSS is measured in a fresh process per implementation. The official model
(github.com/MinkaiXu/EGNO, not part of geomol) is imported from ``--official``, else
``$GEOMOL_OFFICIAL_EGNO``, else ``../shared/reference/official_egno``; without it the official
columns read "skipped". The official state dict is loaded into ours with
``load_official_state_dict``, and the outputs are compared.

    python benchmarks/egno_speed.py [--official PATH] [--quick] [--only nbody,mocap] [--no-generation]
    python benchmarks/egno_speed.py --profile radius_1000   # torch.profiler table of geomol

Prints a table and writes ``benchmarks/results/egno_speed.json`` (command, commit, versions, threads, the
machine probe and, per configuration, the load during its steps and each step's wall, CPU, kernel seconds, page
faults and preemptions: :mod:`geomol.benchmarking`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

from geomol.benchmarking.interleaved import interleaved_medians, load_line, product_gflop
from geomol.benchmarking.run_record import official_checkout, peak_rss_gb, run_metadata, run_worker, write_result

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("GEOMOL_SHARED_DATA", REPO.parent / "shared" / "data"))
RESULTS = REPO / "benchmarks" / "results" / "egno_speed.json"
# Official figures recorded in ../shared/BENCHMARKS.md (2-core machine, 1 thread, busy second core).
RECORDED_OFFICIAL_MS = {"nbody": 148, "mocap": 478, "radius_100": 104, "radius_1000": 1050, "radius_10000": 24800}

ARCH = {"nbody": dict(layers=4, hidden=64, node_features=1, edge_features=2),
        "mocap": dict(layers=6, hidden=128, node_features=2, edge_features=2)}


def configs(quick: bool) -> list[dict]:
    out = [dict(name="nbody", arch="nbody", P=5, steps=20), dict(name="mocap", arch="mocap", P=5, steps=10)]
    for n in (100, 1000, 3000) + (() if quick else (10000,)):
        steps = 20 if n <= 100 else 5 if n <= 3000 else 2
        out.append(dict(name=f"radius_{n}", arch="nbody", P=5, nodes=n, steps=steps))
    for p in (1, 2, 8, 16):
        out.append(dict(name=f"radius_1000_P{p}", arch="nbody", P=p, nodes=1000, steps=5))
    return out


# ----------------------------------------------------------------------------------------- inputs
def radius_inputs(n: int, degree: int = 16, seed: int = 0):
    """Uniform points in a cube and the radius that gives ``degree`` directed edges per node on average."""
    import torch

    from geomol.nn.neighbors import knn_graph, radius_graph

    gen = torch.Generator().manual_seed(seed)
    side = (n * 4.19 / degree) ** (1 / 3)
    x = torch.rand(n, 3, generator=gen) * side
    knn = knn_graph(x, 2 * degree)
    d = (x[knn[0]] - x[knn[1]]).norm(dim=-1)
    r = float(torch.sort(d).values[degree * n]) if d.numel() > degree * n else float(d.max()) + 1e-3
    edge_index = radius_graph(x, r)
    v = torch.randn(n, 3, generator=gen)
    h = v.norm(dim=-1, keepdim=True)
    sq = (x[edge_index[0]] - x[edge_index[1]]).pow(2).sum(-1, keepdim=True)
    edge_attr = torch.cat([torch.randn(edge_index.size(1), 1, generator=gen).sign(), sq], -1)
    return x, h, edge_index, edge_attr, v, x.mean(0, keepdim=True).expand(n, 3).contiguous()


def dataset_inputs(arch: str):
    from torch_geometric.loader import DataLoader

    from geomol.models.dynamics import dynamics_inputs

    if arch == "nbody":
        from geomol.data.datasets.trajectories.nbody import NBodyDataset, generate_splits

        data = generate_splits(seed=43, num_train=100, num_valid=0, num_test=0)
        dataset, batch_size = NBodyDataset("train", data=data), 100
    else:
        from geomol.data.datasets.trajectories.mocap import MocapDataset

        dataset, batch_size = MocapDataset("train", SHARED_DATA / "mocap_run" / "cmu_subject09_run.npz"), 12
    b = next(iter(DataLoader(dataset, batch_size=batch_size)))
    i = dynamics_inputs(b)
    return i.x, i.h, i.edge_index, i.edge_attr, i.v, i.center


# ----------------------------------------------------------------------------------------- worker
def build_models(cfg: dict, with_official: str | None):
    import torch

    from geomol.models.egno import EGNO, load_official_state_dict

    a = ARCH[cfg["arch"]]
    torch.manual_seed(0)
    ours = EGNO(a["node_features"], a["edge_features"], a["hidden"], a["layers"], cfg["P"])
    if with_official is None:
        return ours, None
    sys.path.insert(0, with_official)
    from model.egno import EGNO as OfficialEGNO  # the user's checkout of the official code

    official = OfficialEGNO(n_layers=a["layers"], in_node_nf=a["node_features"], in_edge_nf=a["edge_features"],
                            hidden_nf=a["hidden"], with_v=True, num_modes=2, num_timesteps=cfg["P"])
    with torch.no_grad():  # signed spectral weights, so that the comparison exercises every path
        for name, p in official.named_parameters():
            if "weights1" in name:
                p.normal_(0, 0.3 / p.size(0))
    load_official_state_dict(ours, official.state_dict())
    return ours, official


def step_functions(cfg: dict, models: dict, inputs) -> dict:
    """{"<impl>_fwd_bwd" / "<impl>_forward": fn(step)} for models {"ours" | "official": module}."""
    import torch

    x, h, edge_index, edge_attr, v, center = inputs
    P, n = cfg["P"], x.size(0)
    target = torch.randn(n, P, 3, generator=torch.Generator().manual_seed(1)) + x.unsqueeze(1)
    fns = {}
    for impl, model in models.items():
        if impl == "ours":
            def forward(model=model):
                return model.forward_tensors(x, h, edge_index, edge_attr, v, center).x
        else:
            def forward(model=model):  # official layout [P·N, 3] → [N, P, 3]
                return model(x, h, edge_index, edge_attr, v=v, loc_mean=center)[0].view(P, n, 3).transpose(0, 1)

        def fwd_bwd(step=0, forward=forward, model=model):
            model.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(forward(), target).backward()

        def inference(step=0, forward=forward):
            with torch.no_grad():
                return forward()
        fns[f"{impl}_fwd_bwd"], fns[f"{impl}_forward"] = fwd_bwd, inference
    return fns


def worker(cfg: dict, mode: str, official_path: str | None) -> dict:
    """mode "time": interleaved medians of ours (and official); "rss:<impl>": peak RSS of one alone."""
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    if cfg.get("generation"):
        from geomol.data.datasets.trajectories.nbody import generate_splits

        start = time.perf_counter()
        generate_splits(seed=43, num_train=10000, num_valid=2000, num_test=2000)
        return {"seconds": time.perf_counter() - start}
    inputs = radius_inputs(cfg["nodes"]) if "nodes" in cfg else dataset_inputs(cfg["arch"])
    result = {"nodes": inputs[0].size(0), "edges": int(inputs[2].size(1))}
    ours, official = build_models(cfg, official_path if mode != "rss:ours" else None)
    models = {"ours": ours, "official": official} if mode == "time" else {mode[4:]: ours if mode == "rss:ours"
                                                                          else official}
    fns = step_functions(cfg, {k: m for k, m in models.items() if m is not None}, inputs)
    if mode == "time":
        for part in ("fwd_bwd", "forward"):
            timed = interleaved_medians({k: f for k, f in fns.items() if part in k}, cfg["steps"])
            result[f"load_{part}"] = timed.pop("load")
            result.update(timed)
        result.update(product_gflop(fns))
        if official is not None:
            ref, mine = fns["official_forward"](), fns["ours_forward"]()
            result["rel_err"] = float((mine - ref).norm() / ref.norm())
        return result
    if mode == "rss:official":
        del ours
    for fn in fns.values():
        fn(), fn()
    result[f"{mode[4:]}_peak_rss_gb"] = peak_rss_gb()
    return result


def profile(cfg: dict, steps: int = 5, rows: int = 40) -> str:
    """torch.profiler table (self CPU time) of geomol's fwd+bwd and forward on one configuration."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    torch.set_num_threads(1)
    inputs = radius_inputs(cfg["nodes"]) if "nodes" in cfg else dataset_inputs(cfg["arch"])
    fns = step_functions(cfg, {"ours": build_models(cfg, None)[0]}, inputs)
    for fn in fns.values():
        fn()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            for fn in fns.values():
                fn()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


# ----------------------------------------------------------------------------------------- driver
def fmt(value, spec=".0f", scale=1.0, suffix=""):
    return "skipped" if value is None else format(value * scale, spec) + suffix


def ratio(row: dict, key: str):
    off, ours = row.get(f"official_{key}"), row.get(f"ours_{key}")
    return None if off is None or ours is None else off / ours


HEADER = (f"{'config':<18}{'nodes':>7}{'edges':>8}{'P':>4} | {'official f+b':>12}{'geomol':>8}{'ratio':>8}"
          f"{'cpu':>8}{'work':>8} | {'official fwd':>12}{'geomol':>8}{'ratio':>8}{'cpu':>8}{'work':>8} | "
          f"{'RSS official':>12}{'geomol':>8}{'ratio':>8} | {'rel err':>8}")
FOOTER = ("times in ms, wall medians with both sides alternated in one process (1 thread); ratio, cpu: official / "
          "geomol in wall and in CPU time; work: official / geomol in the arithmetic of the matrix products (GFLOP "
          "counted by torch.profiler, one step each), the speed-up that doing less work gives by itself; RSS: peak GB, "
          "each side alone in a fresh process; rel err: relative difference of the predicted positions (forward)")


def row_line(row: dict) -> str:
    return (f"{row['config']:<18}{fmt(row.get('nodes')):>7}{fmt(row.get('edges')):>8}{row['P']:>4} | "
            f"{fmt(row.get('official_fwd_bwd_seconds'), '.0f', 1e3):>12}{fmt(row.get('ours_fwd_bwd_seconds'), '.0f', 1e3):>8}"
            f"{fmt(ratio(row, 'fwd_bwd_seconds'), '.2f', 1, 'x'):>8}"
            f"{fmt(ratio(row, 'fwd_bwd_cpu_seconds'), '.2f', 1, 'x'):>8}"
            f"{fmt(ratio(row, 'fwd_bwd_product_gflop'), '.2f', 1, 'x'):>8} | "
            f"{fmt(row.get('official_forward_seconds'), '.0f', 1e3):>12}{fmt(row.get('ours_forward_seconds'), '.0f', 1e3):>8}"
            f"{fmt(ratio(row, 'forward_seconds'), '.2f', 1, 'x'):>8}"
            f"{fmt(ratio(row, 'forward_cpu_seconds'), '.2f', 1, 'x'):>8}"
            f"{fmt(ratio(row, 'forward_product_gflop'), '.2f', 1, 'x'):>8} | "
            f"{fmt(row.get('official_peak_rss_gb'), '.2f'):>12}{fmt(row.get('ours_peak_rss_gb'), '.2f'):>8}"
            f"{fmt(ratio(row, 'peak_rss_gb'), '.2f', 1, 'x'):>8} | {fmt(row.get('rel_err'), '.1e'):>8}"
            + (f"  {row['error']}" if "error" in row else ""))


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--official", help="checkout of github.com/MinkaiXu/EGNO (default: $GEOMOL_OFFICIAL_EGNO "
                                           "or ../shared/reference/official_egno)")
    parser.add_argument("--quick", action="store_true", help="skip the 10,000-node graph")
    parser.add_argument("--only", help="comma-separated configuration names")
    parser.add_argument("--no-generation", action="store_true", help="skip timing the 14,000 N-body trajectories")
    parser.add_argument("--profile", help="print a torch.profiler table of geomol on one configuration and exit")
    parser.add_argument("--steps", type=int, help="timed steps per configuration (default: 20 small … 2 large)")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="time", help=argparse.SUPPRESS)
    args = parser.parse_args()
    official = official_checkout(args.official, "GEOMOL_OFFICIAL_EGNO", "official_egno")
    official = str(official) if official else None
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker), args.mode, official)))
        return
    if args.profile:
        print(profile(next(c for c in configs(False) if c["name"] == args.profile)))
        return
    meta = {**run_metadata(), "official": official and os.path.relpath(official, REPO)}
    print(f"official code: {official or 'not found, official columns skipped'}; load {meta['load_average_before']}")
    print(HEADER + "\n" + "-" * len(HEADER))
    rows = []
    for cfg in configs(args.quick):
        if args.only and cfg["name"] not in args.only.split(","):
            continue
        cfg = {**cfg, "steps": min(cfg["steps"], args.steps)} if args.steps else cfg
        flags = ["--worker", json.dumps(cfg)] + (["--official", official] if official else
                                                 ["--official", "/nonexistent"])
        row = {"config": cfg["name"], "P": cfg["P"], **run_worker(__file__, flags + ["--mode", "time"]),
               **run_worker(__file__, flags + ["--mode", "rss:ours"]),
               "recorded_official_ms": RECORDED_OFFICIAL_MS.get(cfg["name"])}
        if official:
            row.update(run_worker(__file__, flags + ["--mode", "rss:official"]))
        rows.append(row)
        print(row_line(row), flush=True)
    print(FOOTER)
    print("\nload during each configuration's training steps (medians):")
    for row in rows:
        if "load_fwd_bwd" in row:
            print(f"{row['config']:<18}" + load_line({**row, "load": row["load_fwd_bwd"]},
                                                     ("official_fwd_bwd", "ours_fwd_bwd")))
    generation = None
    if not args.no_generation:
        generation = run_worker(__file__, ["--worker", json.dumps({"generation": True}), "--mode", "ours"]).get("seconds")
        print(f"\nN-body generation, 14,000 trajectories (10000/2000/2000, 5000 steps, 1 thread): {generation:.1f} s")
    write_result(Path(args.out), meta, rows, nbody_generation_s=generation)


if __name__ == "__main__":
    main()
