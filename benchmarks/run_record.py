"""What every speed benchmark records beside its figures, and the side-by-side timing helpers.

The machine is shared: timings are only comparable within one run, measured alternately
(official, ours, official, ours, …) so that load drift hits both alike, and the load average
is recorded before and after. Peak memory is measured in a fresh process per implementation,
so that memory the allocator kept for one side does not count for the other.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance
from geomol.timing import median_seconds

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(os.environ.get("GEOMOL_REFERENCE", shared_data_dir().parent / "reference"))


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages of the machine."""
    return [round(x, 2) for x in os.getloadavg()]


def run_metadata(threads: int = 1) -> dict:
    """:func:`geomol.provenance.provenance` (command, commit, versions, machine, load) plus ``threads``, the torch
    threads the measurements ran with (set in each worker), the load average kept as ``load_average_before``
    so that :func:`write_result` can add the one after, the float32 CPU product kernel geomol uses and
    :func:`machine_probe`'s throughputs.

    The kernel is decided here, at ``threads`` threads (``geomol.nn.dense.linear_kernel``), and pinned through
    ``$GEOMOL_LINEAR_KERNEL`` for the worker processes, so that every worker of one run uses the same one."""
    from geomol.nn.dense import KERNEL_ENV, linear_kernel

    record = provenance()
    with torch_threads(threads):
        kernel = linear_kernel()
        probe = machine_probe()
    os.environ[KERNEL_ENV] = kernel
    return {**record, "threads": threads, "load_average_before": record["load_average"],
            "linear_kernel": kernel, "machine_probe": probe}


@contextmanager
def torch_threads(threads: int):
    """Run the body with ``threads`` torch threads, then restore the previous count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def machine_probe(repeats: int = 50) -> dict:
    """This CPU's speed on the kinds of work the models do, at the current thread count: a thin float32 product
    ([4096, 64] · [64, 64] through ``F.linear``, GFLOP/s), a SiLU of a 512 KB tensor that stays in cache, and
    the same SiLU of a 2.5 MB tensor into a fresh output (ns per element). Ratios measured on two machines can
    differ because these do (a speed-up from fewer memory passes grows where element-wise work is slow relative
    to products); the figures let a reader tell the machines apart."""
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(4096, 64, generator=gen), torch.randn(64, 64, generator=gen)
    small, out = torch.randn(2048, 64, generator=gen), torch.empty(2048, 64)
    large = torch.randn(10240, 64, generator=gen)
    gemm = median_seconds(lambda: F.linear(x, w), repeats, warmup=2)
    cached = median_seconds(lambda: torch.ops.aten.silu.out(small, out=out), repeats, warmup=2)
    fresh = median_seconds(lambda: F.silu(large), repeats, warmup=2)
    return {"gemm_gflops": round(2 * x.numel() * w.size(0) / gemm / 1e9, 1),
            "silu_cached_ns_per_element": round(1e9 * cached / small.numel(), 3),
            "silu_fresh_ns_per_element": round(1e9 * fresh / large.numel(), 3)}


def official_checkout(option: str | None, env_var: str, default_name: str) -> Path | None:
    """The official code to compare with: ``option``, else ``$env_var``, else the shared reference copy;
    None when that folder does not exist (the benchmark then skips the official column)."""
    path = Path(option or os.environ.get(env_var) or REFERENCE / default_name)
    return path if path.is_dir() else None


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far, GB (ru_maxrss is in kB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _status_gb(field: str) -> float | None:
    """A kB field of /proc/self/status (VmRSS, VmHWM) in GB; None where there is no procfs."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return None


def start_step_memory() -> float | None:
    """Reset the kernel's peak-RSS mark (Linux ``clear_refs`` 5) and return the resident GB now, the
    baseline of :func:`step_memory_gb`; None where the mark cannot be reset."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return _status_gb("VmRSS")


def step_memory_gb(baseline: float | None) -> float | None:
    """Peak resident GB since :func:`start_step_memory` above its baseline: the memory the measured steps
    themselves took, without the interpreter, the libraries, the model and the inputs."""
    peak = _status_gb("VmHWM")
    return None if baseline is None or peak is None else peak - baseline


def interleaved_medians(fns: dict[str, Callable[[int], object]], steps: int, warmup: int = 1) -> dict[str, float]:
    """Median wall and CPU seconds of each ``fn(step)``, called alternately (A B A B …) after
    ``warmup`` calls each: {"<name>_seconds": wall, "<name>_cpu_seconds": CPU time of this process}.
    With one thread on a shared machine the CPU time is the steadier of the two."""
    times: dict[str, list[float]] = {}
    for step in range(warmup + steps):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn(step)
            if step >= warmup:
                times.setdefault(f"{name}_seconds", []).append(time.perf_counter() - wall)
                times.setdefault(f"{name}_cpu_seconds", []).append(time.process_time() - cpu)
    return {key: sorted(t)[len(t) // 2] for key, t in times.items()}


_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def product_gflop(fns: dict[str, Callable[[int], object]], step: int = 0) -> dict[str, float]:
    """{"<name>_product_gflop": GFLOP} of one call ``fn(step)`` of each: the floating-point operations of its
    matrix products (mm, addmm, bmm, …) as torch.profiler counts them (2·m·n·k each), plus those of geomol's
    compiled loops (GET's attention, EGNO's edge MLPs; :func:`geomol.nn.native.counting_products`). The products
    are most of the arithmetic of these models, so the official/geomol ratio of these counts is about how much
    faster geomol can be by doing less work alone; a time ratio above it comes from running the same work
    faster."""
    from torch.profiler import ProfilerActivity, profile

    from geomol.nn.native import counting_products

    counted = {}
    for name, fn in fns.items():
        with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof, counting_products() as native:
            fn(step)
        flops = sum(e.flops for e in prof.key_averages() if e.key in _PRODUCTS and e.flops) + native[0]
        counted[f"{name}_product_gflop"] = round(flops / 1e9, 4)
    return counted


def run_worker(script: str, args: list[str]) -> dict:
    """Run ``python script --worker …`` in a fresh process; its last stdout line is JSON.
    A failure comes back as {"error": last line of stderr}."""
    out = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_result(path: Path, meta: dict, rows: list[dict], **extra) -> None:
    """Write ``{"meta": meta + load after, "rows": rows, **extra}`` as JSON."""
    meta = {**meta, "load_average_after": load_average()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, **extra, "rows": rows}, indent=1))
    print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
