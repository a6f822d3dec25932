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
from pathlib import Path
from typing import Callable

from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(os.environ.get("GEOMOL_REFERENCE", shared_data_dir().parent / "reference"))


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages of the machine."""
    return [round(x, 2) for x in os.getloadavg()]


def run_metadata(threads: int = 1) -> dict:
    """:func:`geomol.provenance.provenance` (command, commit, versions, machine, load) plus ``threads``, the torch
    threads the measurements ran with (set in each worker), and the load average kept as ``load_average_before``
    so that :func:`write_result` can add the one after."""
    record = provenance()
    return {**record, "threads": threads, "load_average_before": record["load_average"]}


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
