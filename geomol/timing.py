"""Timing of small pieces of work, for choices made at run time and for the benchmarks' machine figures."""
from __future__ import annotations

import time
from typing import Callable

__all__ = ["median_seconds"]


def median_seconds(fn: Callable[[], object], repeats: int, warmup: int = 0) -> float:
    """Median wall seconds of ``repeats`` calls of ``fn`` (after ``warmup`` untimed calls)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]
