"""Progress of a simulation: a rich bar with the ETA on a terminal, a plain line a minute otherwise.

A background run's log (``nohup ... > run.log``) is not a terminal, where a rich bar would only
appear at the end; there :class:`SimulationProgress` prints one line every ``every`` seconds.
"""
from __future__ import annotations

import sys
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from geomol.terminal import console, text_column

__all__ = ["SimulationProgress"]


class SimulationProgress:
    """Frames written out of a total, with speed in simulated time per day.

    Args:
        what: description ("aspirin", "fkbp12 seed 1").
        done, total: frames already written (a resumed run) and frames wanted.
        frame_ps: simulated picoseconds per frame (for ns/day).
        enabled: False: silent. every: seconds between plain lines (not a terminal).
    """

    def __init__(self, what: str, done: int, total: int, frame_ps: float, enabled: bool = True,
                 every: float = 60.0):
        self.what, self.start_done, self.total, self.frame_ps = what, done, total, frame_ps
        self.enabled, self.every = enabled, every
        self.terminal = enabled and sys.stderr.isatty()
        self._bar = None
        self.start = self.last = time.perf_counter()

    def __enter__(self) -> "SimulationProgress":
        if self.terminal:
            self._bar = Progress(text_column("{task.description}", style="bold"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("frames, {task.fields[speed]}"), TimeRemainingColumn(),
                                 console=console(stderr=True), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.what, total=self.total, completed=self.start_done, speed="")
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def ns_per_day(self, done: int) -> float | None:
        """Simulated ns per day of wall time in this session (None before the first frame)."""
        elapsed = time.perf_counter() - self.start
        frames = done - self.start_done
        return frames * self.frame_ps * 1e-3 * 86400 / elapsed if frames > 0 and elapsed > 0 else None

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        rate = self.ns_per_day(done)
        speed = f"{rate:.3g} ns/day" if rate is not None else ""
        if self._bar is not None:
            self._bar.update(self._task, completed=done, speed=speed)
            return
        now = time.perf_counter()
        if now - self.last < self.every and done < self.total:
            return
        self.last = now
        frames_per_s = (done - self.start_done) / max(now - self.start, 1e-9)
        left = f", about {(self.total - done) / frames_per_s / 60:.0f} min left" if 0 < frames_per_s and \
            done < self.total else ""
        print(f"{self.what}: {done}/{self.total} frames ({100 * done / max(self.total, 1):.0f} %), {speed}{left}",
              file=sys.stderr, flush=True)
