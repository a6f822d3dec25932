"""Jobs on disk: one SQLite table of job states and one folder per job, written so that a crash leaves no half.

Layout under the data folder::

    jobs.sqlite                 one row per job: state, times, model, settings, counts, progress, error
    jobs/<id>/inputs/           the uploads, under server-made names (receptor.pdb, ligands.sdf, ...)
    jobs/<id>/results/          results.json, results.csv, poses.sdf, plot.png, depictions/<i>.svg

A job's folder is written whole in a hidden staging folder and renamed into place before its row is
added; its ``results/`` folder likewise appears in one rename once complete (:mod:`geomol.serve.worker`).
A job is ``queued``, ``running``, ``done`` or ``failed``. After a restart (:meth:`JobStore.recover`) a
job that was running is ``failed`` with the reason (or ``done`` when its results had been completed),
queued jobs are handed back to be queued again, and staging folders and folders without a row are removed.

A private store (a token-protected server's) keeps the data folder, the job folders and the job table for the
server's user only: folders 0700, files 0600 (the workers write results with umask 077).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

__all__ = ["JobRecord", "JobStore", "JOB_ID", "STATES", "INTERRUPTED"]

JOB_ID = re.compile(r"^[0-9a-f]{32}$")
"""What a job id looks like (server-made, 128 random bits); anything else is never looked up on disk."""
STATES = ("queued", "running", "done", "failed")
INTERRUPTED = "interrupted: the server stopped while this job was running; submit it again"
SUMMARY = "summary.json"
_SCHEMA = """CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, state TEXT NOT NULL, created REAL NOT NULL, started REAL, finished REAL,
    model TEXT NOT NULL, settings TEXT NOT NULL, inputs TEXT NOT NULL, ligands INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0, predicted INTEGER, failed INTEGER, warned INTEGER, error TEXT)"""
_STAGING = ".staging-"


@dataclass
class JobRecord:
    """One job as the API reports it.

    Attributes:
        id: 32 hex digits. state: one of :data:`STATES`. created, started, finished: Unix times (s).
        model: the model name. settings: the job's options (pocket_cutoff, reference, measured).
        inputs: per upload its role, kind and ligand count. ligands: ligands to predict; done: predicted so far.
        predicted, failed, warned: ligands predicted, failed, predicted with warnings (when done).
        error: why the job failed ('' otherwise).
    """

    id: str
    state: str
    created: float
    model: str
    ligands: int
    settings: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)
    started: float | None = None
    finished: float | None = None
    done: int = 0
    predicted: int | None = None
    failed: int | None = None
    warned: int | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class JobStore:
    """The job table and folders under ``data_dir`` (safe to use from several threads of one process);
    ``private``: for the server's user only (see the module notes)."""

    def __init__(self, data_dir: str | Path, private: bool = False):
        self.data_dir, self.private = Path(data_dir), private
        self.jobs_dir = self.data_dir / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        database = self.data_dir / "jobs.sqlite"
        if private:
            database.touch(mode=0o600)
            for path, mode in ((self.data_dir, 0o700), (self.jobs_dir, 0o700), (database, 0o600)):
                os.chmod(path, mode)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(database, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_SCHEMA)

    # ------------------------------------------------------------------ paths
    def job_dir(self, job_id: str) -> Path:
        if not JOB_ID.match(job_id):
            raise ValueError(f"not a job id: {job_id!r}")
        return self.jobs_dir / job_id

    def results_dir(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "results"

    # ------------------------------------------------------------------ writing
    def create(self, files: Iterable[tuple[str, str]], *, model: str, settings: dict, inputs: list,
               ligands: int) -> JobRecord:
        """A new queued job whose inputs are ``files`` ((server-made file name, text) pairs), written whole first."""
        job_id = secrets.token_hex(16)
        staging = self.jobs_dir / f"{_STAGING}{job_id}"
        folder_mode, file_mode = (0o700, 0o600) if self.private else (0o777, 0o666)  # both less the umask
        staging.mkdir(mode=folder_mode)
        (staging / "inputs").mkdir(mode=folder_mode)
        for name, text in files:
            descriptor = os.open(staging / "inputs" / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, file_mode)
            with open(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        staging.rename(self.job_dir(job_id))
        record = JobRecord(job_id, "queued", time.time(), model, ligands, settings, inputs)
        with self._lock:
            self._db.execute("INSERT INTO jobs (id, state, created, model, settings, inputs, ligands) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)", (job_id, "queued", record.created, model,
                                                              json.dumps(settings), json.dumps(inputs), ligands))
        return record

    def _update(self, job_id: str, **values: Any) -> None:
        columns = ", ".join(f"{name} = ?" for name in values)
        with self._lock:
            self._db.execute(f"UPDATE jobs SET {columns} WHERE id = ?", (*values.values(), job_id))

    def mark_running(self, job_id: str) -> None:
        self._update(job_id, state="running", started=time.time(), done=0)

    def mark_queued(self, job_id: str) -> None:
        self._update(job_id, state="queued", started=None, done=0)

    def progress(self, job_id: str, done: int) -> None:
        self._update(job_id, done=done)

    def mark_done(self, job_id: str, summary: dict) -> None:
        self._update(job_id, state="done", finished=time.time(), done=summary["ligands"],
                     predicted=summary["predicted"], failed=summary["failed"], warned=summary["warned"])

    def mark_failed(self, job_id: str, reason: str) -> None:
        self._update(job_id, state="failed", finished=time.time(), error=reason)

    def discard(self, job_id: str) -> None:
        """Remove a job that was never queued (its row, then its folder)."""
        with self._lock:
            self._db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        shutil.rmtree(self.job_dir(job_id), ignore_errors=True)

    # ------------------------------------------------------------------ reading
    @staticmethod
    def _record(row: sqlite3.Row) -> JobRecord:
        values = dict(row)
        values["settings"], values["inputs"] = json.loads(values["settings"]), json.loads(values["inputs"])
        values["error"] = values["error"] or ""
        return JobRecord(**values)

    def get(self, job_id: str) -> JobRecord | None:
        if not JOB_ID.match(job_id):
            return None
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else self._record(row)

    def list(self, limit: int = 100, state: str | None = None) -> list[JobRecord]:
        """The most recent jobs first."""
        query, args = "SELECT * FROM jobs", ()
        if state is not None:
            query, args = query + " WHERE state = ?", (state,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY created DESC LIMIT ?", (*args, limit)).fetchall()
        return [self._record(row) for row in rows]

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        return {state: 0 for state in STATES} | {state: n for state, n in rows}

    def settle(self, job_id: str, reason: str) -> None:
        """End a job whose worker is gone: ``done`` if its results had been completed, else ``failed`` with
        ``reason``; partial result folders are removed either way."""
        for partial in self.job_dir(job_id).glob(".results-*"):
            shutil.rmtree(partial, ignore_errors=True)
        summary = self.results_dir(job_id) / SUMMARY
        if summary.is_file():
            self.mark_done(job_id, json.loads(summary.read_text(encoding="utf-8"))["counts"])
        else:
            shutil.rmtree(self.results_dir(job_id), ignore_errors=True)
            self.mark_failed(job_id, reason)

    # ------------------------------------------------------------------ after a restart
    def recover(self) -> list[str]:
        """Make the table and the folders agree after the previous server stopped (see the module notes).

        Returns:
            the ids of queued jobs, oldest first, to queue again.
        """
        for staging in self.jobs_dir.glob(f"{_STAGING}*"):
            shutil.rmtree(staging, ignore_errors=True)
        known = set()
        for record in self.list(limit=-1):
            known.add(record.id)
            if record.state == "running":
                self.settle(record.id, INTERRUPTED)
        for folder in self.jobs_dir.iterdir():
            if folder.is_dir() and JOB_ID.match(folder.name) and folder.name not in known:
                shutil.rmtree(folder, ignore_errors=True)
            elif self.private and folder.is_dir():  # jobs of an earlier server without a token: closed now
                os.chmod(folder, 0o700)
        return [r.id for r in sorted(self.list(limit=-1, state="queued"), key=lambda r: r.created)]

    def close(self) -> None:
        with self._lock:
            self._db.close()
