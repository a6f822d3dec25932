"""Side-by-side timing of implementations on a shared machine: alternated steps, optional controlled load.

Timings are only comparable within one run, measured alternately (official, ours, official, ours, …) so that load
drift hits both alike (:func:`interleaved_runs`). Each step's wall, CPU, kernel and page-fault figures are kept
beside the medians, with the load while it ran (:class:`geomol.benchmarking.machine_load.LoadRecord`: load average,
steal time, the busiest other processes and their CPU share). Optional controlled load
(:mod:`geomol.benchmarking.stressors`: a CPU-bound or a memory-bound process on another core, started here) runs in
rounds alternated with no load, so that conditions are compared within one run too. :func:`product_gflop` counts the
arithmetic of one call, to tell doing less work from doing the same work faster.
"""
from __future__ import annotations

import os
import resource
import statistics
import time
from contextlib import ExitStack
from typing import Callable

from geomol.benchmarking.machine_load import LoadRecord
from geomol.benchmarking.stressors import Stressor, pin_apart

__all__ = ["interleaved_runs", "interleaved_medians", "load_line", "product_gflop"]


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
