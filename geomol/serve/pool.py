"""A bounded pool of worker processes with a bounded queue, supervised from one thread of the web process.

* Bounded: ``workers`` processes, each running one job at a time; at most ``max_queue`` more jobs wait.
  One more is refused with :class:`QueueFull` (the API answers 503 with ``Retry-After``), before anything
  is written.
* Supervised: one thread reads the workers' messages (:mod:`geomol.serve.worker`), records progress and
  outcomes in the :class:`~geomol.serve.store.JobStore`, hands queued jobs to idle workers, and stops a
  worker whose job runs past ``job_seconds`` (the job fails with the reason) or that died (the job fails
  with its exit code). A stopped worker is replaced at once.
* Workers are forked from a ``forkserver`` that has imported :mod:`geomol.serve.worker` (torch, RDKit, the
  API) once, so a replacement starts in milliseconds and the workers share those pages. Each worker talks
  over its own pipe: stopping one never corrupts a channel the others use. The forkserver imports the very
  ``geomol`` this process runs (:func:`_forkserver_imports_this_geomol`): a ``geomol/`` folder in the current
  directory (the parent of a clone, say) cannot stand in for it.
* Loud when workers cannot start: if the first workers exit before they are ready
  :data:`START_ATTEMPTS` times in a row, the pool stops trying, keeps the reason in :attr:`WorkerPool.failure`
  (health checks and job submissions answer 503 with it) and calls ``on_failure`` (``geomol serve`` exits with
  an error).

Only the supervisor thread writes job outcomes; the web handlers only add jobs and read.
"""
from __future__ import annotations

import collections
import multiprocessing
import multiprocessing.forkserver
import os
import statistics
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Callable, Iterator

from geomol.serve.settings import ServeSettings
from geomol.serve.store import INTERRUPTED, JobStore

__all__ = ["WorkerPool", "QueueFull"]

_POLL_SECONDS = 0.1
START_ATTEMPTS = 3
"""Workers that exit before they are ready, in a row and before any was ready, after which the pool gives up."""


class QueueFull(Exception):
    """No room for another job; ``retry_after`` is a guess of the seconds until there is."""

    def __init__(self, retry_after: int, limit: int):
        super().__init__(f"the job queue is full ({limit} waiting); try again in about {retry_after} s")
        self.retry_after, self.limit = retry_after, limit


def _worker_entry(index: int, connection, threads: int, private: bool) -> None:
    """A worker's first call; imports the worker module (torch, the API) there, never in the web process."""
    from geomol.serve.worker import worker_main

    worker_main(index, connection, threads, private)


@contextmanager
def _forkserver_imports_this_geomol() -> Iterator[None]:
    """While the forkserver starts: the folder that holds this ``geomol`` first on its import path, the current
    folder not on it.

    The forkserver runs ``python -c``, which puts the current folder first on its path; a ``geomol/`` folder there
    (a clone's parent: no ``__init__.py``) would be taken for the package when it is installed in editable mode,
    and every worker would die with ``ModuleNotFoundError``. ``PYTHONSAFEPATH`` keeps the current folder off the
    path, ``PYTHONPATH`` and ``sys.path`` (which newer Pythons hand to the forkserver) put this package's folder first.
    """
    import geomol

    root = str(Path(geomol.__file__).resolve().parent.parent)
    saved_path, saved_env = list(sys.path), {k: os.environ.get(k) for k in ("PYTHONPATH", "PYTHONSAFEPATH")}
    sys.path[:] = [root, *(p for p in saved_path if p not in ("", os.getcwd(), root))]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (root, saved_env["PYTHONPATH"])))
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        sys.path[:] = saved_path
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    connection: Connection
    ready: bool = False
    job: str | None = None
    started: float = 0.0
    closed: bool = False


class WorkerPool:
    """Worker processes for ``settings.workers`` parallel jobs, with ``settings.limits.max_queue`` waiting."""

    def __init__(self, store: JobStore, settings: ServeSettings, on_failure: Callable[[str], None] | None = None):
        self.store, self.settings, self.on_failure = store, settings, on_failure
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(["geomol.serve.worker"])
        self._workers: list[_Worker] = []
        self._pending: collections.deque[dict] = collections.deque()
        self._lock = threading.Lock()
        self._durations: collections.deque[float] = collections.deque(maxlen=20)
        self._stopping = threading.Event()
        self._draining = False
        self._thread: threading.Thread | None = None
        self._respawn_at, self._respawn_delay = 0.0, 0.0
        self._failed_starts = 0
        self.failure: str | None = None
        """Why the workers cannot start (None while they can)."""
        self.models_ready = threading.Event()
        self.models: list[dict] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the forkserver and the supervisor thread, which starts the workers (the web server answers
        meanwhile)."""
        with _forkserver_imports_this_geomol():
            multiprocessing.forkserver.ensure_running()
        self._thread = threading.Thread(target=self._supervise, name="geomol-serve-pool", daemon=True)
        self._thread.start()

    def _spawn(self, index: int) -> _Worker:
        parent_end, child_end = self._context.Pipe(duplex=True)
        private = self.store.private
        process = self._context.Process(target=_worker_entry, args=(index, child_end, self.settings.threads, private),
                                        name=f"geomol-serve-worker-{index}", daemon=True)
        process.start()
        child_end.close()
        return _Worker(process, parent_end)

    def stop(self, grace_seconds: float = 10.0) -> None:
        """Finish running jobs (up to ``grace_seconds``), then stop the workers; waiting jobs stay queued on disk."""
        with self._lock:
            self._draining = True
        deadline = time.monotonic() + grace_seconds
        while (any(w.job for w in self._workers) and time.monotonic() < deadline and self._thread is not None
               and self._thread.is_alive()):
            time.sleep(_POLL_SECONDS)
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        for worker in self._workers:
            self._retire(worker, INTERRUPTED if worker.job else None, gentle=True)

    # ------------------------------------------------------------------ jobs in
    def submit(self, spec: dict, *, admitted: bool = False) -> None:
        """Queue a job (its row already written as ``queued``); ``admitted`` skips the room check (restarts).

        Raises:
            QueueFull: ``max_queue`` jobs already wait for a worker.
        """
        with self._lock:
            if not admitted:
                self._check_room()
            self._pending.append(spec)

    def check_room(self) -> None:
        """Raise :class:`QueueFull` now when a job would be refused (before its upload is written)."""
        with self._lock:
            self._check_room()

    def _check_room(self) -> None:
        # jobs about to go to a free worker do not wait: they do not count against max_queue
        if len(self._pending) >= self.settings.limits.max_queue + self._free_workers():
            raise QueueFull(self._retry_after(), self.settings.limits.max_queue)

    def _free_workers(self) -> int:
        return self.settings.workers - sum(1 for w in self._workers if w.job is not None)

    def _retry_after(self) -> int:
        typical = statistics.median(self._durations) if self._durations else 10.0
        return max(1, round(typical * (len(self._pending) + 1) / max(1, len(self._workers))))

    def status(self) -> dict:
        with self._lock:
            return {"workers": len(self._workers), "ready": sum(w.ready for w in self._workers),
                    "busy": sum(w.job is not None for w in self._workers), "queued": len(self._pending),
                    "max_queue": self.settings.limits.max_queue}

    # ------------------------------------------------------------------ the supervisor thread
    def _supervise(self) -> None:
        for index in range(self.settings.workers):  # the first start waits for the forkserver's imports
            if self._stopping.is_set():
                break
            worker = self._spawn(index)
            with self._lock:
                self._workers.append(worker)
        while not self._stopping.is_set():
            try:
                self._supervise_once()
            except Exception:  # noqa: BLE001 - the supervisor must outlive any one bad message
                traceback.print_exc(file=sys.stderr)
                time.sleep(_POLL_SECONDS)

    def _supervise_once(self) -> None:
        listening = {w.connection: w for w in self._workers if not w.closed}
        for connection in wait(list(listening), timeout=_POLL_SECONDS):
            try:
                message = connection.recv()
            except (EOFError, OSError):  # the worker has gone: _check_workers replaces it
                listening[connection].closed = True
                continue
            self._handle(listening[connection], message)
        self._check_workers()
        self._dispatch()

    def _handle(self, worker: _Worker, message: tuple) -> None:
        kind = message[0]
        if kind == "ready":
            worker.ready, self.models, self._respawn_delay, self._failed_starts = True, message[2], 0.0, 0
            self.models_ready.set()
            return
        job = message[2]
        if job != worker.job:  # a late message about a job this worker no longer runs
            return
        if kind == "progress":
            self.store.progress(job, message[3])
            return
        if kind == "done":
            self.store.mark_done(job, message[3]["counts"])
        else:
            self.store.mark_failed(job, message[3])
        self._durations.append(time.monotonic() - worker.started)
        worker.job = None

    def _check_workers(self) -> None:
        limit = self.settings.limits.job_seconds
        for index, worker in enumerate(self._workers):
            if worker.job and time.monotonic() - worker.started > limit:
                self._replace(index, f"stopped: the job ran past this server's time limit of {limit:g} s per job "
                                     "(submit fewer ligands per job)")
            elif not worker.process.is_alive() and time.monotonic() >= self._respawn_at and not self.failure:
                code = worker.process.exitcode
                if not worker.ready and self._give_up(code):
                    return
                if not worker.ready:  # died while starting: try again later, not in a tight loop
                    self._respawn_delay = min(60.0, max(1.0, 2 * self._respawn_delay))
                    self._respawn_at = time.monotonic() + self._respawn_delay
                    print(f"geomol serve: a worker process failed to start (exit code {code}); starting another "
                          f"in {self._respawn_delay:g} s", file=sys.stderr, flush=True)
                self._replace(index, f"the worker process stopped (exit code {code}) while predicting this job; "
                                     "the server log may say why (e.g. out of memory)")

    def _give_up(self, code: int | None) -> bool:
        """Count a worker that exited before it was ready; after :data:`START_ATTEMPTS` in a row, before any worker
        was ever ready, record the failure and tell ``on_failure``."""
        self._failed_starts += 1
        if self.models_ready.is_set() or self._failed_starts < START_ATTEMPTS:
            return False
        self.failure = (f"the worker processes cannot start: {self._failed_starts} exited before they were ready "
                        f"(last exit code {code}); the server log shows their error")
        if self.on_failure is not None:
            self.on_failure(self.failure)
        else:
            print(f"geomol serve: error: {self.failure}", file=sys.stderr, flush=True)
        return True

    def _replace(self, index: int, reason: str) -> None:
        worker = self._workers[index]
        self._retire(worker, reason if worker.job else None, gentle=False)
        with self._lock:
            self._workers[index] = self._spawn(index)

    def _retire(self, worker: _Worker, reason: str | None, *, gentle: bool) -> None:
        """Stop a worker (asking first when ``gentle`` and it is idle); its job, if any, is settled with ``reason``."""
        if gentle and worker.job is None and worker.process.is_alive():
            try:
                worker.connection.send(None)
            except OSError:
                pass
            worker.process.join(timeout=2.0)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(timeout=5.0)
        worker.connection.close()
        if worker.job and reason:
            self.store.settle(worker.job, reason)
        worker.job = None

    def _dispatch(self) -> None:
        with self._lock:
            if self._draining:
                return
            for worker in self._workers:
                if not self._pending:
                    return
                if worker.ready and worker.job is None and worker.process.is_alive():
                    spec = self._pending.popleft()
                    worker.job, worker.started = spec["id"], time.monotonic()
                    self.store.mark_running(spec["id"])
                    worker.connection.send(spec)
