"""Controlled load for the speed benchmarks: a stressor process of known kind on another core.

The machine the benchmarks run on is shared, so a "quiet" measurement is rarely quiet. To compare like with like,
a benchmark can start its own load next to the measured steps and record how much work that load did:

* ``cpu``: integer arithmetic in a Python loop (the interpreter's few KB stay in the core's L1/L2 cache): it takes
  a core's time and nothing else;
* ``memory``: copies between two 256 MB arrays, far larger than any cache: it streams through main memory and
  evicts the shared last-level cache, the load a memory-bound neighbour puts on the machine.

The stressor runs pinned to a CPU other than the benchmark's own (:func:`pin_apart`), at the benchmark's
niceness, and reports its rate (iterations/s, or GB/s read + written) and its CPU seconds when stopped.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

__all__ = ["KINDS", "Stressor", "pin_apart"]

_REPORT = ("import json, signal, sys\n"
           "done = 0\n"
           "def report(*_):\n"
           "    print(json.dumps({{'done': done, 'unit': '{unit}'}}), flush=True)\n"
           "    sys.exit(0)\n"
           "signal.signal(signal.SIGTERM, report)\n")
KINDS = {
    "cpu": _REPORT.format(unit="million iterations/s") + (
        "x = 1\n"
        "while True:\n"
        "    for _ in range(100000):\n"
        "        x = (x * 1103515245 + 12345) & 0xFFFFFFFF\n"
        "    done += 0.1\n"),
    "memory": _REPORT.format(unit="GB/s") + (
        "import numpy as np\n"
        "source = np.ones(1 << 25)\n"  # 256 MB of float64
        "target = np.empty_like(source)\n"
        "while True:\n"
        "    np.copyto(target, source)\n"
        "    done += 2 * source.nbytes / 1e9\n"),
}
"""Each kind's program: a loop that counts its work and prints ``{"done", "unit"}`` as JSON on SIGTERM."""


def pin_apart() -> tuple[int, int]:
    """Pin this process to the last CPU it may run on and return (that CPU, another one for a stressor); where
    only one CPU is allowed, both are that CPU (the stressor then shares the benchmark's core)."""
    allowed = sorted(os.sched_getaffinity(0))
    mine = allowed[-1]
    os.sched_setaffinity(0, {mine})
    return mine, allowed[0]


class Stressor:
    """``with stressor: ...`` runs the stressor while the body runs (started at the first block, paused with SIGSTOP
    between blocks, so that it keeps its memory and its count); :meth:`stop` ends it and :meth:`summary` gives its
    kind, CPU, seconds run, CPU seconds, rate (work / seconds run) and the share of a CPU it got."""

    def __init__(self, kind: str, cpu: int | None = None):
        if kind not in KINDS:
            raise ValueError(f"stressor kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.kind, self.cpu = kind, cpu
        self.record = {"kind": kind, "cpu": cpu, "seconds": 0.0, "cpu_seconds": None, "done": None, "unit": None}
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> Stressor:
        if self._process is None:
            self._process = subprocess.Popen([sys.executable, "-c", KINDS[self.kind]], stdout=subprocess.PIPE,
                                             text=True)
            if self.cpu is not None:
                os.sched_setaffinity(self._process.pid, {self.cpu})
        else:
            self._process.send_signal(signal.SIGCONT)
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self._process.send_signal(signal.SIGSTOP)
        self.record["seconds"] += time.perf_counter() - self._started

    def stop(self) -> None:
        """End the stressor (if it ran) and read its count and CPU time."""
        process, self._process = self._process, None
        if process is None:
            return
        process.send_signal(signal.SIGCONT)
        process.send_signal(signal.SIGTERM)
        _, _, usage = os.wait4(process.pid, 0)
        process.returncode = 0
        lines = process.stdout.read().strip().splitlines()
        process.stdout.close()
        report = json.loads(lines[-1]) if lines else {"done": None, "unit": None}
        self.record.update(cpu_seconds=usage.ru_utime + usage.ru_stime, **report)

    def summary(self) -> dict:
        """The record (after :meth:`stop`, called here if needed) with ``rate`` and ``cpu_share``."""
        self.stop()
        record = dict(self.record)
        seconds, done, cpu = record["seconds"], record.pop("done"), record["cpu_seconds"]
        record.update(seconds=round(seconds, 2), cpu_seconds=None if cpu is None else round(cpu, 2),
                      rate=None if done is None or not seconds else round(done / seconds, 3),
                      cpu_share=None if cpu is None or not seconds else round(cpu / seconds, 3))
        return record
