"""How many CPU threads the ``geomol`` command gives torch.

torch's default is one thread per core of the machine, whether or not other processes keep those
cores busy; on a shared machine that oversubscribes the cores and the many small kernels of GET and
EGNO then run many times slower than on one thread. The command therefore picks, in this order:

1. ``--threads N`` on the command line;
2. ``OMP_NUM_THREADS`` from the environment;
3. the physical cores this process may run on (``os.sched_getaffinity``), never more than are
   free by the one-minute load average, and at least one.

With more threads than free cores (chosen by 1 or 2), torch's OpenMP threads would spin while they wait for
each other (GNU OpenMP's default) on cores that other processes need, and every parallel operation waits for a
thread the scheduler has set aside; GET then takes several times the CPU time and wall time of one thread
(figures in docs/training.md, "Speed on a busy machine"). The command then sets ``OMP_WAIT_POLICY=PASSIVE``
(waiting threads sleep) before torch loads, unless ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set already.
"""
from __future__ import annotations

import os
import sys

__all__ = ["default_threads", "physical_cores", "resolve_threads", "apply_threads", "take_threads_option",
           "wait_policy", "free_cores"]

WAIT_ENVIRONMENT = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
"""Variables by which a user sets how OpenMP threads wait; :func:`wait_policy` leaves them alone when set."""


def _allowed_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def physical_cores(cpus: list[int], cpuinfo: str | None = None) -> int:
    """Distinct physical cores among the logical ``cpus`` (hyper-threads of one core count once).

    ``cpuinfo``: the text of ``/proc/cpuinfo`` (read when None); without core ids (other systems),
    every logical CPU counts as a core.
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as handle:
                cpuinfo = handle.read()
        except OSError:
            return max(1, len(cpus))
    cores: dict[int, tuple[str, str]] = {}
    processor, package = None, "0"
    for line in cpuinfo.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "processor":
            processor, package = int(value), "0"
        elif key == "physical id":
            package = value
        elif key == "core id" and processor is not None:
            cores[processor] = (package, value)
    known = [cores[cpu] for cpu in cpus if cpu in cores]
    if len(known) < len(cpus):
        return max(1, len(cpus))
    return max(1, len(set(known)))


def free_cores(cpus: list[int] | None = None, load: float | None = None) -> int:
    """Logical CPUs this process may run on, minus those the one-minute load average says are busy (may be ≤ 0)."""
    cpus = _allowed_cpus() if cpus is None else cpus
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = 0.0
    return int(len(cpus) - load + 0.5)


def default_threads(cpus: list[int] | None = None, load: float | None = None, cpuinfo: str | None = None) -> int:
    """Physical cores available to this process, minus those the load average says are busy (≥ 1)."""
    cpus = _allowed_cpus() if cpus is None else cpus
    return max(1, min(physical_cores(cpus, cpuinfo), free_cores(cpus, load)))


def wait_policy(threads: int, free: int, environ: dict[str, str] | None = None) -> str | None:
    """``"PASSIVE"`` where ``threads`` exceed the ``free`` cores (at least one) and ``environ`` (default: this
    process's) sets no OpenMP wait policy; else None (the runtime's default: spin a while, then sleep)."""
    environ = os.environ if environ is None else environ
    if threads <= max(1, free) or any(name in environ for name in WAIT_ENVIRONMENT):
        return None
    return "PASSIVE"


def resolve_threads(option: int | None, environ: dict[str, str] | None = None) -> int:
    """``--threads`` if given, else ``OMP_NUM_THREADS``, else :func:`default_threads`."""
    if option is not None:
        return max(1, int(option))
    value = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return default_threads()


def apply_threads(threads: int) -> None:
    """Set torch's intra-op threads; child processes (DDP ranks) inherit ``OMP_NUM_THREADS``. With more threads
    than free cores, and torch not loaded yet, OpenMP threads are made to sleep while they wait
    (:func:`wait_policy`; the runtime reads the variable when it loads, with torch)."""
    policy = wait_policy(threads, free_cores())
    if policy is not None and "torch" not in sys.modules:
        os.environ["OMP_WAIT_POLICY"] = policy
    import torch

    torch.set_num_threads(threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))


def take_threads_option(argv: list[str], remove: bool) -> tuple[int | None, list[str]]:
    """The value of ``--threads N`` / ``--threads=N`` in ``argv`` and argv (without it if ``remove``).

    Raises ValueError for a value that is not a positive integer.
    """
    value, rest, i = None, [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--threads" and i + 1 < len(argv):
            text, i = argv[i + 1], i + 2
            kept = [arg, text]
        elif arg.startswith("--threads="):
            text, i = arg.split("=", 1)[1], i + 1
            kept = [arg]
        else:
            rest.append(arg)
            i += 1
            continue
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"--threads needs a positive integer, got {text!r}")
        value = int(text)
        if not remove:
            rest.extend(kept)
    return value, rest
