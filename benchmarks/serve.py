"""Load test of ``geomol serve`` on loopback: N simulated chemists submitting the example job, N = 1, 4, 16.

A real server (``python -m geomol serve`` on 127.0.0.1, ``--workers`` processes, ``--max-queue`` waiting jobs)
is started once; for each level, locust (headless, as a library) runs N users for ``--seconds`` (≤ 60). Each
user submits the example (receptor + six posed ligands), polls the job until it is done, and starts again; a
503 (queue full) is not an error: the user waits ``Retry-After`` (at most 5 s) and tries again. After the
level, every accepted job is followed until it ends (the drain), and the server's own job list is checked.

Per level the table gives: jobs accepted, refused (503, queue full), other errors (any other status, or a
5xx), jobs done / failed / lost (accepted but not in the server's list, or never ending), throughput (jobs
done per second of the level, ligands per second), job latency p50 / p95 (submission to done, seen by the
user), POST latency p50 / p95, the most jobs seen waiting (sampled from ``/healthz``, against
``--max-queue``), and the server's memory: the web process's RSS and the total PSS of the web process, the
forkserver and the workers (from ``/proc``, sampled every 0.5 s).

    pip install -e ".[serve,serve-bench]"
    python benchmarks/serve.py --workers 2 --max-queue 8 --seconds 45 --users 1 4 16

Writes ``benchmarks/results/serve_load.json`` (provenance, settings, one row per level).
"""
from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
import requests  # noqa: E402
from locust import HttpUser, constant, task  # noqa: E402
from locust.env import Environment  # noqa: E402

from geomol.provenance import provenance  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "data" / "example"
UPLOAD = {"receptor": ("tnks2_protein.pdb", (EXAMPLE / "tnks2_protein.pdb").read_bytes()),
          "ligands": ("tnks2_ligands.sdf", (EXAMPLE / "tnks2_ligands.sdf").read_bytes())}
LIGANDS_PER_JOB = 6
MAX_LEVEL_SECONDS = 60.0


class Level:
    """What one level's users saw: accepted job ids, refusals, other errors, job latencies (s)."""

    def __init__(self):
        self.accepted: list[str] = []
        self.refused = 0
        self.errors: list[str] = []
        self.job_seconds: list[float] = []
        self.post_ms: list[float] = []


LEVEL = Level()


class Chemist(HttpUser):
    """Submits the example, follows it to the end, submits again."""

    wait_time = constant(0)

    @task
    def submit_and_follow(self):
        started = time.monotonic()
        with self.client.post("/v1/jobs", files=UPLOAD, name="POST /v1/jobs", catch_response=True) as response:
            LEVEL.post_ms.append(1000 * (time.monotonic() - started))
            if response.status_code == 503:
                response.success()
                LEVEL.refused += 1
                gevent.sleep(min(5.0, float(response.headers.get("Retry-After", 1))))
                return
            if response.status_code != 202:
                reason = f": {type(response.error).__name__} {response.error}" if response.error else ""
                LEVEL.errors.append(f"POST {response.status_code}{reason}"[:300])
                response.failure(f"status {response.status_code}")
                return
            job = response.json()["id"]
        LEVEL.accepted.append(job)
        while True:
            state = self.client.get(f"/v1/jobs/{job}", name="GET /v1/jobs/{id}")
            if state.status_code != 200:
                LEVEL.errors.append(f"GET {state.status_code}")
                return
            if state.json()["state"] in ("done", "failed"):
                LEVEL.job_seconds.append(time.monotonic() - started)
                return
            gevent.sleep(0.25)


# ---------------------------------------------------------------------- the server and its memory
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _children(pid: int) -> set[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _memory_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory_mb(server_pid: int) -> tuple[float, float]:
    """(RSS of the web process, PSS of it and all its descendants) in MiB."""
    pids = {server_pid} | _children(server_pid)
    return _memory_kb(server_pid, "Rss") / 1024, sum(_memory_kb(p, "Pss") for p in pids) / 1024


class Sampler:
    """Samples the server's memory and its waiting jobs every half second, in a greenlet."""

    def __init__(self, url: str, pid: int):
        self.url, self.pid = url, pid
        self.rss, self.pss, self.queued = [], [], []
        self._greenlet = gevent.spawn(self._run)

    def _run(self):
        while True:
            rss, pss = memory_mb(self.pid)
            self.rss.append(rss)
            self.pss.append(pss)
            try:
                self.queued.append(requests.get(self.url + "/healthz", timeout=5).json()["pool"]["queued"])
            except (requests.RequestException, ValueError, KeyError):
                pass
            gevent.sleep(0.5)

    def stop(self):
        self._greenlet.kill()


def start_server(args, data_dir: Path, log) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    command = [sys.executable, "-m", "geomol", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--data-dir", str(data_dir), "--workers", str(args.workers), "--max-queue", str(args.max_queue),
               "--threads", "1"]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            health = requests.get(url + "/healthz", timeout=5).json()
            if health["pool"]["ready"] == args.workers:
                return server, url
        except (requests.RequestException, ValueError):
            pass
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}; see {log.name}")
        time.sleep(0.5)
    raise SystemExit("the server did not become ready within 300 s")


# ---------------------------------------------------------------------- one level
def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def drain(url: str, accepted: list[str], timeout: float) -> dict[str, str]:
    """Follow every accepted job to its end (or the timeout); their final states by id."""
    states, deadline = {}, time.monotonic() + timeout
    while time.monotonic() < deadline:
        for job in accepted:
            if states.get(job) not in ("done", "failed"):
                response = requests.get(f"{url}/v1/jobs/{job}", timeout=10)
                states[job] = response.json()["state"] if response.status_code == 200 else f"HTTP {response.status_code}"
        if all(s in ("done", "failed") for s in states.values()):
            break
        gevent.sleep(0.5)
    return states


def run_level(url: str, server_pid: int, users: int, seconds: float, args) -> dict:
    global LEVEL
    LEVEL = Level()
    sampler = Sampler(url, server_pid)
    environment = Environment(user_classes=[Chemist], host=url)
    runner = environment.create_local_runner()
    started = time.monotonic()
    runner.start(users, spawn_rate=users)
    gevent.sleep(seconds)
    runner.stop()
    elapsed = time.monotonic() - started
    states = drain(url, LEVEL.accepted, args.drain_seconds)
    sampler.stop()
    listed = {job["id"] for job in requests.get(f"{url}/v1/jobs", params={"limit": 500}, timeout=10).json()}
    lost = [job for job in LEVEL.accepted if job not in listed or states.get(job) not in ("done", "failed")]
    done_in_level = len(LEVEL.job_seconds)
    return {"users": users, "seconds": round(elapsed, 1), "accepted": len(LEVEL.accepted), "refused_503": LEVEL.refused,
            "other_errors": len(LEVEL.errors), "error_kinds": sorted(set(LEVEL.errors)),
            "locust_failures": environment.stats.total.num_failures,
            "done": sum(s == "done" for s in states.values()), "failed": sum(s == "failed" for s in states.values()),
            "lost": len(lost), "jobs_per_s": round(done_in_level / elapsed, 3),
            "ligands_per_s": round(LIGANDS_PER_JOB * done_in_level / elapsed, 2),
            "job_p50_s": _round(_percentile(LEVEL.job_seconds, 0.5)), "job_p95_s": _round(_percentile(LEVEL.job_seconds, 0.95)),
            "post_p50_ms": _round(_percentile(LEVEL.post_ms, 0.5), 1), "post_p95_ms": _round(_percentile(LEVEL.post_ms, 0.95), 1),
            "max_queued": max(sampler.queued, default=0), "max_queue_limit": args.max_queue,
            "web_rss_mb_max": _round(max(sampler.rss, default=0.0), 1),
            "total_pss_mb_max": _round(max(sampler.pss, default=0.0), 1)}


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


COLUMNS = [("users", "N"), ("accepted", "accepted"), ("refused_503", "503 (queue full)"), ("other_errors", "other errors"),
           ("done", "done"), ("failed", "failed"), ("lost", "lost"), ("jobs_per_s", "jobs/s"),
           ("ligands_per_s", "ligands/s"), ("job_p50_s", "job p50 s"), ("job_p95_s", "job p95 s"),
           ("post_p50_ms", "POST p50 ms"), ("post_p95_ms", "POST p95 ms"), ("max_queued", "max waiting"),
           ("web_rss_mb_max", "web RSS MiB"), ("total_pss_mb_max", "total PSS MiB")]


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join("" if row[key] is None else str(row[key]) for key, _ in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--seconds", type=float, default=45.0, help=f"load per level (≤ {MAX_LEVEL_SECONDS:g})")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-queue", type=int, default=8)
    parser.add_argument("--drain-seconds", type=float, default=120.0)
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "serve_load.json"))
    args = parser.parse_args()
    if not 0 < args.seconds <= MAX_LEVEL_SECONDS:
        parser.error(f"--seconds must be in (0, {MAX_LEVEL_SECONDS:g}]")
    with tempfile.TemporaryDirectory(prefix="geomol-serve-bench-") as folder:
        log = open(Path(folder) / "server.log", "wb")
        server, url = start_server(args, Path(folder) / "data", log)
        try:
            rows = []
            for users in args.users:
                rows.append(run_level(url, server.pid, users, args.seconds, args))
                print(table(rows[-1:]), flush=True)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
            log.close()
    print(table(rows))
    record = {"benchmark": "serve_load", "provenance": provenance(), "settings": {
        "workers": args.workers, "max_queue": args.max_queue, "seconds_per_level": args.seconds,
        "job": "data/example: tnks2_protein.pdb + tnks2_ligands.sdf (6 posed ligands), default model",
        "host": "127.0.0.1"}, "rows": rows, "table": table(rows)}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(record, indent=1) + "\n")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
