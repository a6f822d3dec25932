"""The worker process: holds the models, runs one job at a time, reports to the web process.

A worker is forked from a server process that has already imported this module (and so torch, RDKit and
:mod:`geomol.api`; see :mod:`geomol.serve.pool`), so it starts in milliseconds. Messages to the web
process (tuples on the worker's own pipe, which also brings it job specs, and None to stop):

* ``("ready", worker, models)`` once, with ``geomol.api.list_models("affinity")``;
* ``("progress", worker, job, done, total)`` at most every :data:`PROGRESS_SECONDS`;
* ``("done", worker, job, summary)`` or ``("failed", worker, job, reason)``.

A worker that finds the web process gone (killed, crashed) stops by itself, between jobs and between
ligands, and before it publishes results: nothing is written for a server that no longer exists.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import time
import traceback

from geomol import api
from geomol.errors import GeomolError
from geomol.serve.predict_job import run_job

__all__ = ["worker_main", "PROGRESS_SECONDS"]

PROGRESS_SECONDS = 0.5
INTERNAL_ERROR = "internal error while predicting (the server log has the details)"
_MAX_MODELS = 4


class ServerGone(Exception):
    """The web process that started this worker has stopped."""


def _parent_alive() -> bool:
    parent = multiprocessing.parent_process()
    return parent is None or parent.is_alive()


class _Models:
    """Loaded affinity models by name (at most a few; the oldest is dropped first)."""

    def __init__(self):
        self._loaded: dict[str, object] = {}

    def get(self, name: str):
        if name not in self._loaded:
            if len(self._loaded) >= _MAX_MODELS:
                self._loaded.pop(next(iter(self._loaded)))
            self._loaded[name] = api.load_model(name)
        return self._loaded[name]


def _run(spec: dict, models: _Models, connection, worker: int) -> None:
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if not _parent_alive():
            raise ServerGone
        now = time.monotonic()
        if now - last[0] >= PROGRESS_SECONDS or done == total:
            last[0] = now
            connection.send(("progress", worker, spec["id"], done, total))

    try:
        summary = run_job(spec, models.get(spec["model"]), progress)
    except GeomolError as exc:
        connection.send(("failed", worker, spec["id"], str(exc)))
    except ServerGone:
        raise
    except Exception:  # noqa: BLE001 - the job fails with a plain message; the traceback goes to the server log
        traceback.print_exc(file=sys.stderr)
        connection.send(("failed", worker, spec["id"], INTERNAL_ERROR))
    else:
        connection.send(("done", worker, spec["id"], summary))


def worker_main(worker: int, connection, threads: int, private: bool = False) -> None:
    """Run the job specs that arrive on ``connection`` until None arrives or the web process is gone.

    ``private``: every file and folder this worker writes is for the server's user only (a token-protected server).
    """
    import torch

    if private:
        os.umask(0o077)
    torch.set_num_threads(threads)
    models = _Models()
    connection.send(("ready", worker, api.list_models("affinity")))
    while True:
        if not connection.poll(1.0):
            if not _parent_alive():
                return
            continue
        try:
            spec = connection.recv()
        except EOFError:
            return
        if spec is None:
            return
        try:
            _run(spec, models, connection, worker)
        except ServerGone:
            return
