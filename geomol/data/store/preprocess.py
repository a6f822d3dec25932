"""Fill a :class:`~geomol.data.store.cache.ProcessedStore` from recipes, in parallel and resumably.

:func:`preprocess` is what ``geomol preprocess`` and every dataset constructor call. It

* skips items already stored (resume after an interruption recomputes nothing);
* builds the others in worker processes, one *group* (e.g. one receptor) per task so that a
  parsed receptor is reused for all its ligands, and commits each finished task at once;
* never dies for one bad complex: a :class:`~geomol.errors.GeomolError` raised while building
  an item is recorded (and not retried on the next run unless ``retry_failed``); any other
  exception is a bug, reported the same way but retried next time and counted in a warning;
* writes a report next to the store: ``reports/<name>.json`` (summary and skipped items) and
  ``reports/<name>.skipped.csv`` (id, file, reason).
"""
from __future__ import annotations

import csv
import io
import json
import multiprocessing
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from geomol.data.blocks import BlockGraph
from geomol.data.store.cache import FileHasher, ProcessedStore, Recipe, atomic_write_text, encode_graphs, recipe_key
from geomol.errors import GeomolError
from geomol.terminal import text_column

__all__ = ["SkippedItem", "PreprocessReport", "preprocess"]

PROGRESS_LINE_SECONDS = 30.0
"""Seconds between plain progress lines when the output is not a terminal."""


@dataclass(frozen=True)
class SkippedItem:
    """An item that could not be built. ``expected`` is False for non-GeomolError exceptions (bugs)."""

    id: str
    key: str
    file: str
    reason: str
    error: str
    expected: bool = True


@dataclass
class PreprocessReport:
    """What one :func:`preprocess` call did.

    Attributes:
        keys: per recipe (in the order given), its store key, or ``None`` if it was skipped.
        built / reused: items processed now / found already stored.
        skipped: items that failed, now or (deterministically) in an earlier run.
        warned: ``{id: warnings}`` of items built now whose builder warned (e.g. a ligand kept
            unsanitised); they are in the store.
        seconds: wall time.
        store: the store's folder.
    """

    name: str
    total: int
    built: int = 0
    reused: int = 0
    skipped: list[SkippedItem] = field(default_factory=list)
    warned: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    store: str = ""
    keys: list[str | None] = field(default_factory=list, repr=False)

    @property
    def items_per_second(self) -> float:
        return self.built / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "total": self.total, "built": self.built, "reused": self.reused,
                "skipped": len(self.skipped), "warned": len(self.warned), "seconds": round(self.seconds, 3),
                "items_per_second": round(self.items_per_second, 2)}

    def write(self, directory) -> None:
        """Write ``<name>.json`` and ``<name>.skipped.csv`` into ``directory`` (atomically)."""
        doc = {**self.summary(), "skipped_items": [asdict(s) for s in self.skipped], "warnings": self.warned}
        atomic_write_text(directory / f"{self.name}.json", json.dumps(doc, indent=1))
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["id", "file", "reason", "error"])
        writer.writerows([s.id, s.file, s.reason, s.error] for s in self.skipped)
        atomic_write_text(directory / f"{self.name}.skipped.csv", buffer.getvalue())


# ------------------------------------------------------------------------------ worker side
def _normalise(result: Any) -> tuple[dict[str, BlockGraph], dict[str, Any]]:
    meta: dict[str, Any] = {}
    if isinstance(result, tuple):
        result, meta = result
    graphs = {"graph": result} if isinstance(result, BlockGraph) else dict(result)
    return graphs, dict(meta)


def _build_one(builder: Callable, key: str, rid: str, files: dict, params: dict):
    """``(key, blob, meta)`` for a built item, or ``(key, None, failure)``."""
    first_file = next(iter(files.values()), "")
    try:
        with warnings.catch_warnings(record=True) as caught:  # kept with the item, shown in the report
            warnings.simplefilter("always")
            graphs, meta = _normalise(builder(files, **params))
    except GeomolError as exc:
        return key, None, {"id": rid, "file": exc.source or first_file, "reason": exc.reason,
                           "record": exc.record, "error": type(exc).__name__, "expected": True}
    except Exception as exc:  # noqa: BLE001 - a long job must survive a bug on one item; reported
        return key, None, {"id": rid, "file": first_file, "reason": f"{type(exc).__name__}: {exc}",
                           "record": None, "error": type(exc).__name__, "expected": False}
    meta = {"id": rid, "num_blocks": sum(g.num_blocks for g in graphs.values()),
            "num_atoms": sum(g.num_atoms for g in graphs.values()), "builder": meta,
            "warnings": sorted({str(w.message) for w in caught})[:5]}
    return key, encode_graphs(graphs, meta), meta


def _init_worker() -> None:
    # One intra-op thread per worker: parallelism comes from the processes, and a forked child
    # must not enter the parent's OpenMP thread pool (that deadlocks).
    torch.set_num_threads(1)


def _run_task(task):
    builder, items = task
    return [_build_one(builder, *item) for item in items]


# ------------------------------------------------------------------------------ main side
def _tasks(todo: list[tuple[str, Recipe]], chunk_size: int) -> list[tuple[Callable, list]]:
    """Tasks of at most ``chunk_size`` items, each holding items of one group and one builder."""
    by_group: dict[tuple[str, str], list] = {}
    for key, recipe in todo:
        item = (key, recipe.id, dict(recipe.files), dict(recipe.params))
        by_group.setdefault((recipe.builder_name, recipe.group), [recipe.builder]).append(item)
    tasks = []
    for builder, *items in by_group.values():
        tasks += [(builder, items[i:i + chunk_size]) for i in range(0, len(items), chunk_size)]
    return tasks


def _progress(enabled: bool) -> Progress:
    return Progress(text_column("{task.description}", style="bold"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), disable=not enabled)


class _ProgressLines:
    """Plain progress lines on stderr, at most one per ``every`` seconds, for output that is not a
    terminal (a log file, a pipe, a batch job), where the rich bar is not drawn until the end.

    Args:
        what: the description (``'preprocessing corpus'``).
        total: items to build.
        enabled: False makes every call a no-op.
        every: seconds between lines.
    """

    def __init__(self, what: str, total: int, enabled: bool, every: float):
        self.what, self.total, self.enabled, self.every = what, total, enabled, every
        self.start = self.last = time.perf_counter()

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.last < self.every and done < self.total):
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        left = f", about {(self.total - done) / rate / 60:.0f} min left" if 0 < done < self.total else ""
        print(f"{self.what}: {done}/{self.total} ({100 * done / max(self.total, 1):.0f} %), "
              f"{rate:.1f} items/s{left}", file=sys.stderr, flush=True)


def _execute(tasks, store: ProcessedStore, num_workers: int, mp_context: str | None,
             on_done: Callable[[list], None]) -> None:
    if num_workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            on_done(_run_task(task))
        return
    context = multiprocessing.get_context(mp_context)
    store.close()  # no LMDB handle may cross a fork
    with context.Pool(processes=num_workers, initializer=_init_worker) as pool:
        for results in pool.imap_unordered(_run_task, tasks):
            on_done(results)


def preprocess(
    recipes: Sequence[Recipe],
    store: ProcessedStore,
    *,
    name: str = "items",
    num_workers: int = 0,
    progress: bool = True,
    retry_failed: bool = False,
    chunk_size: int = 16,
    mp_context: str | None = None,
    write_report: bool = True,
    known_skipped: Sequence[SkippedItem] = (),
) -> PreprocessReport:
    """Build every recipe not yet in ``store``; return (and write) a :class:`PreprocessReport`.

    Args:
        recipes: what to build.
        store: where to put it (created if needed).
        name: name of the report files under ``<store root>/reports/``.
        num_workers: worker processes (0 or 1: build in this process).
        progress: show a rich progress bar.
        retry_failed: rebuild items whose earlier build raised a GeomolError.
        chunk_size: items per task (tasks never mix receptor groups).
        mp_context: multiprocessing start method (``'fork'``, ``'spawn'``, ...); platform default if None.
        write_report: write the report files.
        known_skipped: items the caller rejected before preprocessing; listed first in the report.
    """
    start = time.perf_counter()
    report = PreprocessReport(name=name, total=len(recipes) + len(known_skipped), skipped=list(known_skipped),
                              store=str(store.root))
    hasher = FileHasher(store.root / "file_hashes.json")
    todo: dict[str, Recipe] = {}
    failures: dict[str, dict] = {}
    for recipe in recipes:
        try:
            key = recipe_key(recipe, hasher)
        except GeomolError as exc:  # e.g. a missing input file: report, never abort
            report.keys.append(None)
            report.skipped.append(SkippedItem(recipe.id, "", exc.source or "", exc.reason, type(exc).__name__))
            continue
        report.keys.append(key)
        if key in todo or key in failures:
            continue
        if store.has(key):
            report.reused += 1
            continue
        old = store.failure(key)
        if old is not None and not retry_failed:
            failures[key] = old
        else:
            todo[key] = recipe
    hasher.save()

    def on_done(results):
        # a bug (unexpected exception) is not persisted, so that a fixed geomol retries the item
        store.write([r for r in results if r[1] is not None or r[2].get("expected", True)])
        for key, blob, meta in results:
            if blob is None:
                failures[key] = meta
            else:
                report.built += 1
                if meta["warnings"]:
                    report.warned[meta["id"]] = meta["warnings"]
        bar.update(job, advance=len(results), rate=f"{report.built / max(time.perf_counter() - start, 1e-9):.1f}/s")
        lines(report.built + len(failures) - failed_before)

    with _progress(progress and bool(todo)) as bar:  # nothing to build: no empty bar
        job = bar.add_task(f"preprocessing {name}", total=len(todo), rate="")
        failed_before = len(failures)
        lines = _ProgressLines(f"preprocessing {name}", len(todo),
                               progress and bool(todo) and not bar.console.is_terminal, PROGRESS_LINE_SECONDS)
        tasks = _tasks(list(todo.items()), chunk_size)
        _execute(tasks, store, num_workers, mp_context, on_done)

    store.close()  # later reads use a lock-free read-only handle
    _collect_failures(report, recipes, failures, store)
    report.seconds = time.perf_counter() - start
    if write_report:
        report.write(store.root / "reports")
    return report


def _collect_failures(report: PreprocessReport, recipes: Sequence[Recipe], failures: dict[str, dict],
                      store: ProcessedStore) -> None:
    """One SkippedItem per failed recipe; a warning counts the unexpected (bug) failures."""
    bugs = sum(not f.get("expected", True) for f in failures.values())
    if bugs:
        warnings.warn(f"{bugs} item(s) failed with an unexpected error (a bug in geomol?); "
                      f"see {store.root / 'reports' / (report.name + '.json')}", RuntimeWarning, stacklevel=3)
    for index, key in enumerate(report.keys):
        if key is not None and key in failures:
            failure = failures[key]
            report.skipped.append(SkippedItem(recipes[index].id, key, str(failure.get("file") or ""),
                                              failure["reason"], failure["error"], failure.get("expected", True)))
            report.keys[index] = None
