"""Progress of a screen: ligands done of the library, rate, ETA, failures so far.

On a terminal a live bar (rich); elsewhere (a batch job's log) one plain line every ``interval`` seconds,
so a cluster job's output shows the progress too. Shards skipped because an earlier run completed them
count as done but not towards the rate.
"""
from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

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
        self.console = console or Console(stderr=True)
        self.done = self.failed = self.skipped = 0
        self._start = time.monotonic()
        self._last_line = self._start
        self._live = self.console.is_terminal and not quiet
        columns = (TextColumn("screening"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                   TextColumn("failed {task.fields[failed]}"), TimeElapsedColumn(), TextColumn("ETA"),
                   TimeRemainingColumn())
        self._bar = Progress(*columns, console=self.console, disable=not self._live, transient=False)
        self._task = self._bar.add_task("ligands", total=total, rate="", failed=0)

    def __enter__(self) -> "ScreenProgress":
        self._bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.__exit__(*exc)

    @property
    def rate(self) -> float:
        """Ligands per second screened by this run (skipped shards excluded)."""
        elapsed = time.monotonic() - self._start
        return (self.done - self.skipped) / elapsed if elapsed > 0 else 0.0

    def skip(self, ligands: int) -> None:
        """Ligands of shards that an earlier run completed."""
        self.skipped += ligands
        self.advance(ligands, 0)

    def advance(self, ligands: int, failed: int) -> None:
        self.done += ligands
        self.failed += failed
        self._bar.update(self._task, advance=ligands, rate=f"{self.rate:.1f} lig/s", failed=self.failed)
        now = time.monotonic()
        if not self._live and not self.quiet and (now - self._last_line >= self.interval or self.done == self.total):
            self._last_line = now
            remaining = self.total - self.done
            eta = remaining / self.rate if self.rate > 0 else float("nan")
            self.console.print(f"screened {self.done}/{self.total} ligands ({self.skipped} from an earlier run), "
                               f"{self.rate:.1f} ligands/s, {self.failed} failed, ETA {eta / 60:.1f} min",
                               highlight=False, soft_wrap=True)
