"""What every speed benchmark records beside its figures: the run's metadata, memory, workers and result file.

The machine is shared: timings are only comparable within one run, measured alternately (official, ours, official,
ours, …; :mod:`geomol.benchmarking.interleaved`) so that load drift hits both alike. Every result records the
machine (:func:`geomol.provenance.cpu_description` and :func:`machine_probe`'s throughputs), the torch threads and
the float32 product kernel the workers used (:func:`run_metadata`) and the load average before and after
(:func:`write_result`). Peak memory is measured in a fresh process per implementation (:func:`run_worker`), so that
memory the allocator kept for one side does not count for the other.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from geomol.benchmarking.machine_load import load_average
from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance
from geomol.timing import median_seconds
from geomol.version import PACKAGE_DIR

__all__ = ["CHECKOUT", "REFERENCE", "checkout_relative", "labelled", "run_metadata", "torch_threads", "machine_probe", "fresh_page_microseconds",
           "official_checkout", "peak_rss_gb", "start_step_memory", "step_memory_gb", "run_worker", "write_result"]

CHECKOUT = PACKAGE_DIR.parent
"""The checkout holding the ``geomol`` package (the repository root of an editable install): workers run there, and
result paths inside it are printed relative to it."""
REFERENCE = Path(os.environ.get("GEOMOL_REFERENCE", shared_data_dir().parent / "reference"))
"""Where the official implementations are looked for by default (:func:`official_checkout`)."""


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


def run_worker(script: str, args: list[str]) -> dict:
    """Run ``python script --worker …`` in a fresh process; its last stdout line is JSON.
    A failure comes back as {"error": last line of stderr}."""
    out = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=CHECKOUT)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_result(path: Path, meta: dict, rows: list[dict], **extra) -> None:
    """Write ``{"meta": meta + load after, "rows": rows, **extra}`` as JSON."""
    meta = {**meta, "load_average_after": load_average()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, **extra, "rows": rows}, indent=1))
    print(f"wrote {checkout_relative(path)}")


def checkout_relative(path) -> str:
    """``path`` relative to the checkout when it lies inside it (what results record and print), else as given."""
    path = Path(path).resolve()
    return str(path.relative_to(CHECKOUT) if path.is_relative_to(CHECKOUT) else path)


def labelled(specs: list[str], label_of=lambda spec: spec) -> dict[str, str]:
    """``{label: value}`` of command-line items ``LABEL=VALUE`` (``--model egno-flow=runs/…/last.ckpt``,
    ``--run aspirin=md_data/…npz``); an item without ``=`` is labelled by ``label_of(item)`` (default: itself)."""
    return dict(spec.split("=", 1) if "=" in spec else (label_of(spec), spec) for spec in specs)

