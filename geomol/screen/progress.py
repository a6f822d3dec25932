"""Progress of a screen: ligands done of the library, rate, ETA, failures so far.

On a terminal a live bar (rich); elsewhere (a batch job's log) one plain line every ``interval`` seconds,
so a cluster job's output shows the progress too. It moves from the first ligand: running shards report
the ligands posed so far (:meth:`ScreenProgress.partial`, from the engine's thread), finished shards
replace that with their count. Shards skipped because an earlier run completed them count as done but
not towards the rate, so a resumed screen shows the rate of this run (and no rate until this run has
done something, rather than "0.0 ligands/s"); the ETA is the ligands left at that rate.
"""
from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from geomol.terminal import console as plain_console

__all__ = ["ScreenProgress"]


class ScreenProgress:
    """Report ligands done and failed; use as a context manager.

    Args:
        total: ligands in the library.
        console: where to report (stderr by default); quiet: report nothing.
        interval: seconds between plain lines when the console is not a terminal.
    """

    def __init__(self, total: int, console: Console | None = None, quiet: bool = False, interval: float = 30.0):
        self.total, self.quiet, self.interval = total, quiet, interval
        self.console = console or plain_console(stderr=True)
        self.done = self.failed = self.skipped = 0
        self._running: dict[int, int] = {}  # shard number -> ligands posed so far
        self._finished: set[int] = set()  # a progress event may arrive after its shard's result
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._last_line = self._start
        self._live = self.console.is_terminal and not quiet
        columns = (TextColumn("screening"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                   TextColumn("failed {task.fields[failed]}"), TimeElapsedColumn(),
                   TextColumn("ETA {task.fields[eta]}"))
        self._bar = Progress(*columns, console=self.console, disable=not self._live, transient=False)
        self._task = self._bar.add_task("ligands", total=total, rate="", failed=0, eta="–")

    def __enter__(self) -> "ScreenProgress":
        self._bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.__exit__(*exc)

    @property
    def screened(self) -> int:
        """Ligands this run has done: finished shards, and the ligands posed in running ones."""
        return self.done - self.skipped + sum(self._running.values())

    @property
    def rate(self) -> float | None:
        """Ligands per second screened by this run (skipped shards excluded); None before it screened any."""
        elapsed = time.monotonic() - self._start
        return self.screened / elapsed if self.screened > 0 and elapsed > 0 else None

    def skip(self, ligands: int) -> None:
        """Ligands of shards that an earlier run completed."""
        with self._lock:
            self.skipped += ligands
            self.done += ligands
            self._show()

    def partial(self, shard: int, posed: int) -> None:
        """A running shard has posed ``posed`` of its ligands."""
        with self._lock:
            if shard not in self._finished:
                self._running[shard] = posed
                self._show()

    def advance(self, ligands: int, failed: int, shard: int | None = None) -> None:
        """A shard finished (or failed as a whole) with ``ligands`` ligands, ``failed`` of them failed."""
        with self._lock:
            self._running.pop(shard, None)
            self._finished.add(shard)
            self.done += ligands
            self.failed += failed
            self._show()

    def _show(self) -> None:
        rate = self.rate
        shown = self.done + sum(self._running.values())
        left = self.total - shown
        eta = left / rate if rate else None
        rate_text = f"{rate:.1f} lig/s" if rate is not None else ""
        eta_text = "–" if eta is None else f"{eta / 60:.1f} min" if eta >= 60 else f"{eta:.0f} s"
        self._bar.update(self._task, completed=shown, rate=rate_text, failed=self.failed, eta=eta_text)
        now = time.monotonic()
        if not self._live and not self.quiet and (now - self._last_line >= self.interval or self.done == self.total):
            self._last_line = now
            speed = f"{rate:.1f} ligands/s" if rate is not None else "no rate yet"
            self.console.print(f"screened {shown}/{self.total} ligands ({self.skipped} from an earlier run), "
                               f"{speed}, {self.failed} failed, ETA {eta_text}", highlight=False, soft_wrap=True,
                               markup=False)
