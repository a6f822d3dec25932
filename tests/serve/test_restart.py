"""A real ``geomol serve`` process killed in the middle of a job, then restarted on the same data folder.

The job list after the restart is consistent: the finished job is listed with the same result files, the
interrupted one is failed with the reason and has no results, the waiting one is queued again; no staging or
partial folder is left, and the killed server's workers stop by themselves. The same server also shows the
request time limit on a real socket (a client that stops sending its body gets 408).
"""
from __future__ import annotations

import os
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from geomol.serve.store import INTERRUPTED, JobStore
from tests.serve.conftest import EXAMPLE, needs_serve_extra
from tests.serve.processes import Server

needs_serve_extra()

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to follow the server's processes")


def _descendants(pid: int) -> set[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _stalled_upload_answer(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as connection:
        connection.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; "
                           b"boundary=x\r\nContent-Length: 100000\r\n\r\n--x\r\n")
        return connection.recv(4096)


def test_a_killed_server_restarts_with_a_consistent_job_list(tmp_path):
    data = tmp_path / "data"
    sdf = (EXAMPLE / "tnks2_ligands.sdf").read_bytes()
    first = Server(data, tmp_path / "server.log", "--workers", "1", "--request-time-limit", "2")
    try:
        first.wait_ready()
        assert "libtorch" not in Path(f"/proc/{first.process.pid}/maps").read_text()  # the web process stays small
        finished = first.submit(sdf)
        first.wait_until(lambda: first.get(f"/v1/jobs/{finished}")["state"] == "done", "the first job")
        with urllib.request.urlopen(f"{first.url}/v1/jobs/{finished}/results.csv") as response:
            table = response.read()
        assert b" 408 " in _stalled_upload_answer(first.port)

        interrupted, waiting = first.submit(sdf * 10), first.submit(sdf)
        first.wait_until(lambda: first.get(f"/v1/jobs/{interrupted}")["done"] > 0, "the long job to start")
        helpers = _descendants(first.process.pid)
        os.kill(first.process.pid, signal.SIGKILL)  # the server only: its workers must notice and stop
        first.process.wait(timeout=10)
        deadline = time.monotonic() + 20
        while _alive(helpers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(helpers), "processes of the killed server still run"
    finally:
        first.kill_group()

    second = Server(data, tmp_path / "server.log", "--workers", "1", "--request-time-limit", "2")
    try:
        jobs = second.wait_until(lambda: {j["id"]: j for j in second.get("/v1/jobs")}, "the restarted server")
        assert jobs[finished]["state"] == "done"
        with urllib.request.urlopen(f"{second.url}/v1/jobs/{finished}/results.csv") as response:
            assert response.read() == table
        assert (jobs[interrupted]["state"], jobs[interrupted]["error"]) == ("failed", INTERRUPTED)
        assert jobs[waiting]["state"] in ("queued", "running", "done")
    finally:
        second.kill_group()

    store = JobStore(data)  # after a second crash the waiting job is still there: queued again (or it ran)
    recovered, after = store.recover(), store.get(waiting)
    assert recovered == [waiting] or after.state == "done" or after.error == INTERRUPTED
    folders = sorted(p.name for p in (data / "jobs").iterdir())
    assert folders == sorted([finished, interrupted, waiting])
    assert not (data / "jobs" / interrupted / "results").exists()
    assert not list((data / "jobs").glob("*/.results-*")) and not list((data / "jobs").glob(".staging-*"))
    assert (data / "jobs" / finished / "results" / "summary.json").is_file()
    store.close()
