"""What every speed benchmark records beside its figures, and the side-by-side timing helpers.

The machine is shared: timings are only comparable within one run, measured alternately
(official, ours, official, ours, …) so that load drift hits both alike. Every timing records the
machine (:func:`geomol.provenance.cpu_description` and :func:`machine_probe`'s throughputs) and the load
while it ran (:class:`LoadRecord`: load average, steal time, the busiest other processes and their CPU share),
and each step's wall, CPU, kernel and page-fault figures beside the medians. Optional controlled load
(:mod:`stressors`: a CPU-bound or a memory-bound process on another core, started here) runs in rounds
alternated with no load, so that conditions are compared within one run too. Peak memory is measured in a fresh
process per implementation, so that memory the allocator kept for one side does not count for the other.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable

from machine_load import LoadRecord, load_average
from stressors import Stressor, pin_apart

from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance
from geomol.timing import median_seconds

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(os.environ.get("GEOMOL_REFERENCE", shared_data_dir().parent / "reference"))


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
            "silu_fresh_ns_per_element": round(1e9 * fresh / large.numel(), 3),
            "fresh_page_us": fresh_page_microseconds()}


def fresh_page_microseconds(megabytes: int = 64, repeats: int = 5) -> float:
    """µs to bring one 4 KB page of fresh memory into use (the page fault and the zeroing behind a new tensor
    larger than the allocator keeps): filling a newly allocated ``megabytes`` tensor, less filling it again, per
    page (median of ``repeats``). Code that allocates much per step (the official GET's training step faults in
    ~11 GB) runs at a speed that follows this figure; on a virtual machine that hands free memory back to its
    host it changes with how long memory had been free."""
    import torch

    elements = megabytes << 18  # float32
    costs = []
    for _ in range(repeats):
        start = time.perf_counter()
        tensor = torch.empty(elements).fill_(1.0)
        first = time.perf_counter() - start
        start = time.perf_counter()
        tensor.fill_(2.0)
        costs.append(first - (time.perf_counter() - start))
        del tensor
    return round(1e6 * statistics.median(costs) / (megabytes * 256), 3)


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


_USAGE = ("wall", "cpu", "sys", "page_faults", "preempted", "compiled")
"""What :func:`interleaved_runs` records of each step: wall and CPU seconds (user + kernel), the kernel's part,
minor page faults (fresh memory touched, 4 KB each), involuntary context switches (times the scheduler took
the CPU away) and the CPU seconds inside geomol's compiled loops (:func:`geomol.nn.native.timing_compiled`; 0 for
the official code)."""


def _usage() -> tuple[float, ...]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (time.perf_counter(), usage.ru_utime + usage.ru_stime, usage.ru_stime, usage.ru_minflt, usage.ru_nivcsw)


def _summary(samples: dict[str, dict[str, list]]) -> dict:
    """Medians of each fn's steps as {"<name>_seconds", "<name>_cpu_seconds", "<name>_sys_seconds",
    "<name>_page_faults", "<name>_preempted"}, the steps themselves as "<name>_steps" and, for the first two fns
    (A, B), "<A>_over_<B>_paired": the median over rounds of A's wall time / B's in the same round (steadier than
    the ratio of medians where the load drifts)."""
    out = {}
    for name, steps in samples.items():
        keys = dict(wall="seconds", cpu="cpu_seconds", sys="sys_seconds", page_faults="page_faults",
                    preempted="preempted", compiled="compiled_seconds")
        out.update({f"{name}_{keys[k]}": statistics.median(v) for k, v in steps.items()})
        out[f"{name}_steps"] = {k: [round(x, 4) for x in v] for k, v in steps.items()}
    for a in samples:
        for b in samples:
            if a != b:
                pairs = zip(samples[a]["wall"], samples[b]["wall"])
                out[f"{a}_over_{b}_paired"] = statistics.median(x / y for x, y in pairs)
    return out


def interleaved_runs(fns: dict[str, Callable[[int], object]], steps: int, warmup: int = 1,
                     loads: tuple[str, ...] = ("none",)) -> dict[str, dict]:
    """Each ``fn(step)`` called alternately (A B A B …) after ``warmup`` calls each, under each controlled load in
    turn: ``steps`` rounds, each round one step of every fn under every load of ``loads`` ("none", or a
    :mod:`stressors` kind started on another core for that round; with a stressor this process is pinned to one
    CPU, in every round, so that conditions differ by the stressor alone; its CPUs are given back at the end). Returns {load: :func:`_summary` of its
    steps + "load" (:class:`LoadRecord` summary of its rounds) + "stressor" (its record, with a stressor)}."""
    allowed = os.sched_getaffinity(0)
    pinned = pin_apart() if any(kind != "none" for kind in loads) else None
    samples = {kind: {name: {k: [] for k in _USAGE} for name in fns} for kind in loads}
    records = {kind: LoadRecord() for kind in loads}
    stressors = {kind: Stressor(kind, pinned[1]) for kind in loads if kind != "none"}
    try:
        for step in range(warmup):
            for fn in fns.values():
                fn(step)
        _rounds(fns, range(warmup, warmup + steps), loads, samples, records, stressors)
    finally:
        for stressor in stressors.values():
            stressor.stop()
        os.sched_setaffinity(0, allowed)
    out = {}
    for kind in loads:
        out[kind] = {**_summary(samples[kind]), "load": records[kind].summary()}
        if kind in stressors:
            out[kind]["stressor"] = stressors[kind].summary()
        if pinned is not None:
            out[kind]["load"]["pinned_cpu"] = pinned[0]
    return out


def _rounds(fns, steps, loads, samples, records, stressors) -> None:
    """The measured rounds of :func:`interleaved_runs`: per step, per load, one call of every fn."""
    from geomol.nn.native import timing_compiled

    for step in steps:
        for kind in loads:
            with ExitStack() as stack:
                if kind in stressors:
                    stack.enter_context(stressors[kind])
                stack.enter_context(records[kind])
                for name, fn in fns.items():
                    with timing_compiled() as compiled:
                        before = _usage()
                        fn(step)
                        after = _usage()
                    for key, a, b in zip(_USAGE, before + (0.0,), after + (sum(compiled.values()),)):
                        samples[kind][name][key].append(b - a)


def load_line(row: dict, names: tuple[str, str] = ("official", "ours")) -> str:
    """One line on the load under which ``row`` (an :func:`interleaved_runs` result) was measured: the stressor and
    the rate it reached, the load average, busy CPUs, other processes' CPUs and steal, and for the two ``names``
    their median CPU seconds (of which the kernel's), page faults, the compiled loops' seconds and the paired wall
    ratio."""
    load, stressor = row.get("load") or {}, row.get("stressor")
    parts = [f"{row.get('load_kind', 'none'):<6}"]
    parts.append(f"stressor {stressor['rate'] or 0:.2f} {stressor['unit']} at {stressor['cpu_share'] or 0:.0%} of a CPU"
                 if stressor else "no stressor")
    if load:
        parts.append(f"load avg {load['load_average_before'][0]:.1f}→{load['load_average_after'][0]:.1f}, "
                     f"busy CPUs {load['busy_cpus']:.2f} (others {load['others_cpus']:.2f}), steal "
                     f"{load['steal_percent']:.1f} %")
    for name in names:
        if f"{name}_cpu_seconds" in row:
            parts.append(f"{name} CPU {row[f'{name}_cpu_seconds']:.3f} s (kernel {row[f'{name}_sys_seconds']:.3f}, "
                         f"{row[f'{name}_page_faults'] / 1e3:.0f}k faults, compiled {row[f'{name}_compiled_seconds']:.3f})")
    paired = row.get(f"{names[0]}_over_{names[1]}_paired")
    if paired is not None:
        parts.append(f"paired wall ratio {paired:.2f}x")
    return "; ".join(parts)


def interleaved_medians(fns: dict[str, Callable[[int], object]], steps: int, warmup: int = 1) -> dict:
    """:func:`interleaved_runs` without controlled load: {"<name>_seconds": median wall, "<name>_cpu_seconds":
    median CPU time of this process, ..., "load": what else ran}. With one thread on a shared machine the CPU
    time is the steadier of the two."""
    return interleaved_runs(fns, steps, warmup)["none"]


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
