"""EGNO speed and memory: ours against the official implementation on the same inputs and weights.

Configurations (as in ``../shared/BENCHMARKS.md``): N-body (batch 100 × 5 particles, 4 layers,
hidden 64, P 5), Mocap Run (batch 12 × 31 joints, 6 layers, hidden 128), one radius graph of mean
degree 16 with 100 … 10,000 nodes (N-body architecture), and P = 1 … 16 on the 1,000-node graph.
Each configuration and implementation runs in a fresh subprocess with ``torch.set_num_threads(1)``:
median time of forward+backward (MSE to a fixed target) and of forward alone (no grad) after a
warm-up step, and the process's peak RSS. The official model is imported from a checkout of
github.com/MinkaiXu/EGNO given with ``--official`` (it is not part of geomol); the official state
dict is loaded into ours with ``load_official_state_dict``, and the outputs are compared.

    python benchmarks/egno_speed.py [--official PATH] [--quick] [--only nbody,mocap] [--no-generation]

Prints a table and writes ``benchmarks/results/egno_speed.json``.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = shared_data_dir()
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
        from geomol.data.datasets.nbody import NBodyDataset, generate_splits

        data = generate_splits(seed=43, num_train=100, num_valid=0, num_test=0)
        dataset, batch_size = NBodyDataset("train", data=data), 100
    else:
        from geomol.data.datasets.mocap import MocapDataset

        dataset, batch_size = MocapDataset("train", SHARED_DATA / "mocap_run" / "cmu_subject09_run.npz"), 12
    b = next(iter(DataLoader(dataset, batch_size=batch_size)))
    i = dynamics_inputs(b)
    return i.x, i.h, i.edge_index, i.edge_attr, i.v, i.center


# ----------------------------------------------------------------------------------------- worker
def interleaved_medians(fns: dict, steps: int) -> dict:
    """Median ms of each function, run alternately (A B A B ...) so that load drift hits all alike."""
    for fn in fns.values():
        fn()  # warm-up
    times = {name: [] for name in fns}
    for _ in range(steps):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * sorted(t)[len(t) // 2] for name, t in times.items()}


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
    """{"<impl>_fwd_bwd_ms" / "<impl>_forward_ms": callable} for models {"ours" | "official": module}."""
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

        def fwd_bwd(forward=forward, model=model):
            model.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(forward(), target).backward()

        def inference(forward=forward):
            with torch.no_grad():
                return forward()
        fns[f"{impl}_fwd_bwd_ms"], fns[f"{impl}_forward_ms"] = fwd_bwd, inference
    return fns


def worker(cfg: dict, mode: str, official_path: str | None) -> dict:
    """mode "time": interleaved medians of ours (and official); "rss:<impl>": peak RSS of one alone."""
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    if cfg.get("generation"):
        from geomol.data.datasets.nbody import generate_splits

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
        result.update(interleaved_medians({k: f for k, f in fns.items() if "fwd_bwd" in k}, cfg["steps"]))
        result.update(interleaved_medians({k: f for k, f in fns.items() if "forward" in k}, cfg["steps"]))
        if official is not None:
            ref, mine = fns["official_forward_ms"](), fns["ours_forward_ms"]()
            result["rel_err"] = float((mine - ref).norm() / ref.norm())
        return result
    if mode == "rss:official":
        del ours
    for fn in fns.values():
        fn(), fn()
    result[f"{mode[4:]}_peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux
    return result


# ----------------------------------------------------------------------------------------- driver
def run_worker(cfg: dict, mode: str, official: str | None) -> dict:
    cmd = [sys.executable, __file__, "--worker", json.dumps(cfg), "--mode", mode]
    if official:
        cmd += ["--official", official]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(value, spec=".0f"):
    return "–" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", help="path to a checkout of github.com/MinkaiXu/EGNO")
    parser.add_argument("--quick", action="store_true", help="skip the 10,000-node graph")
    parser.add_argument("--only", help="comma-separated configuration names")
    parser.add_argument("--no-generation", action="store_true", help="skip timing the 14,000 N-body trajectories")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="time", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker), args.mode, args.official)))
        return
    rows = []
    header = (f"{'config':<18}{'nodes':>7}{'edges':>8}{'P':>4} | {'ours f+b':>9}{'fwd':>7}{'RSS GB':>7} | "
              f"{'official f+b':>12}{'fwd':>7}{'RSS GB':>7} | {'speed-up':>8}{'rel err':>9} | {'recorded':>8}")
    print(header + "\n" + "-" * len(header))
    for cfg in configs(args.quick):
        if args.only and cfg["name"] not in args.only.split(","):
            continue
        row = {"config": cfg["name"], "P": cfg["P"], **run_worker(cfg, "time", args.official),
               **run_worker(cfg, "rss:ours", None), "recorded_official_ms": RECORDED_OFFICIAL_MS.get(cfg["name"])}
        if args.official:
            row.update(run_worker(cfg, "rss:official", args.official))
        if "official_fwd_bwd_ms" in row:
            row["speedup_fwd_bwd"] = row["official_fwd_bwd_ms"] / row["ours_fwd_bwd_ms"]
            row["speedup_forward"] = row["official_forward_ms"] / row["ours_forward_ms"]
        rows.append(row)
        print(f"{cfg['name']:<18}{fmt(row.get('nodes')):>7}{fmt(row.get('edges')):>8}{cfg['P']:>4} | "
              f"{fmt(row.get('ours_fwd_bwd_ms')):>9}{fmt(row.get('ours_forward_ms')):>7}"
              f"{fmt(row.get('ours_peak_rss_gb'), '.2f'):>7} | {fmt(row.get('official_fwd_bwd_ms')):>12}"
              f"{fmt(row.get('official_forward_ms')):>7}{fmt(row.get('official_peak_rss_gb'), '.2f'):>7} | "
              f"{fmt(row.get('speedup_fwd_bwd'), '.2f'):>8}{fmt(row.get('rel_err'), '.1e'):>9} | "
              f"{fmt(row['recorded_official_ms']):>8}" + (f"  {row['error']}" if "error" in row else ""))
    generation = None if args.no_generation else run_worker({"generation": True}, "ours", None).get("seconds")
    if generation is not None:
        print(f"\nN-body generation, 14,000 trajectories (10000/2000/2000, 5000 steps, 1 thread): {generation:.1f} s")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "egno_speed", "machine": platform.platform(),
                                   "python": platform.python_version(), "official_compared": bool(args.official),
                                   "nbody_generation_s": generation, "rows": rows,
                                   "provenance": provenance()}, indent=1))
    print(f"written {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
