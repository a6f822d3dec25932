"""A real token-protected ``geomol serve`` against hostile clients, over real sockets.

Idle connections (from this client's address and from another) must not lock anyone out: health checks and
authenticated jobs are answered while they sit open, and the server closes them. A client that sends its headers
or its body too slowly is cut off. All files of one request share one unpacked-size budget, the form's field count
is bounded, and a job's folder is private to the server's user.
"""
from __future__ import annotations

import gzip
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from geomol.serve.settings import Limits
from tests.serve.conftest import EXAMPLE, needs_serve_extra
from tests.serve.processes import Server, closed_by_server, example_parts, multipart, raw_request

needs_serve_extra()

TOKEN = "hostile-test-token-0123456789"
HEADER_SECONDS = 2.0
REQUEST_SECONDS = 3.0
OTHER_CLIENT = "127.0.0.2"  # another loopback address: another client to the server
IDLE = 64


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    token_file = folder / "token"
    token_file.write_text(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    started = Server(folder / "data", folder / "server.log", "--workers", "1", "--token-file", str(token_file),
                     "--max-upload-mb", "1", "--request-time-limit", str(REQUEST_SECONDS),
                     "--header-time-limit", str(HEADER_SECONDS), token=TOKEN)
    try:
        started.wait_ready()
        yield started
    finally:
        started.kill_group()


def _idle_connections(port: int, source: str, count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        try:
            sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)))
        except OSError:  # refused at once: as good as closed
            pass
    return sockets


def test_idle_connections_lock_no_one_out(server):
    idle = _idle_connections(server.port, "127.0.0.1", IDLE) + _idle_connections(server.port, OTHER_CLIENT, IDLE)
    try:
        started = time.monotonic()
        status, health = raw_request(server.port, "GET", "/healthz", headers=server.auth)
        assert (status, health.get("status")) == (200, "ok"), health
        status, _ = raw_request(server.port, "GET", "/healthz", headers=server.auth, source=OTHER_CLIENT)
        assert status == 200
        assert raw_request(server.port, "GET", "/healthz")[0] == 401  # refused for the token, not for the load
        body, content_type = multipart(example_parts())
        status, job = raw_request(server.port, "POST", "/v1/jobs", body=body,
                                  headers={"Content-Type": content_type, **server.auth})
        assert status == 202, job
        assert time.monotonic() - started < HEADER_SECONDS  # answered at once, not after the idle ones timed out
        assert all(closed_by_server(s, HEADER_SECONDS + 3) for s in idle), "idle connections stay open"
        server.wait_until(lambda: server.get(f"/v1/jobs/{job['id']}")["state"] == "done", "the job", 120)
    finally:
        for s in idle:
            s.close()


def test_one_address_holds_a_bounded_number_of_connections(server):
    idle = _idle_connections(server.port, OTHER_CLIENT, IDLE)
    try:
        time.sleep(0.5)
        still_open = [s for s in idle if not closed_by_server(s, 0.2)]
        assert 0 < len(still_open) <= Limits().max_client_connections < IDLE
    finally:
        for s in idle:
            s.close()


def test_a_slow_sender_is_cut_off(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as trickle:  # headers, a byte at a time
        trickle.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < HEADER_SECONDS + 5 and not closed:
            try:
                trickle.sendall(b"X")
            except OSError:
                closed = True
                break
            closed = closed_by_server(trickle, 0.3)
        assert closed and time.monotonic() - started < HEADER_SECONDS + 3

    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: "
            "multipart/form-data; boundary=x\r\nContent-Length: 100000\r\n\r\n--x\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=REQUEST_SECONDS + 10) as slow_body:
        slow_body.sendall(head)
        started = time.monotonic()
        answer = slow_body.recv(4096)
        assert b" 408 " in answer and time.monotonic() - started < REQUEST_SECONDS + 2
        assert closed_by_server(slow_body, 2)


def _padded_gzip(text: bytes, size: int) -> bytes:
    return gzip.compress(text + b"\n" * (size - len(text)))


def test_all_files_of_a_request_share_one_unpacked_budget(server):
    budget = 1024 * 1024
    receptor = _padded_gzip((EXAMPLE / "tnks2_protein.pdb").read_bytes(), int(0.6 * budget))
    ligands = _padded_gzip((EXAMPLE / "tnks2_ligands.sdf").read_bytes(), int(0.6 * budget))
    assert len(receptor) + len(ligands) < budget / 4
    body, content_type = multipart([("receptor", "r.pdb.gz", receptor), ("ligands", "l.sdf.gz", ligands)])
    status, answer = raw_request(server.port, "POST", "/v1/jobs", body=body,
                                 headers={"Content-Type": content_type, **server.auth})
    assert status == 413, answer
    assert answer["error"]["limit"] == "max_request_bytes" and "together" in answer["error"]["message"]


def test_a_form_with_more_fields_than_the_limit_is_refused(server):
    parts = example_parts()
    extra = [(f"note{i}", None, b"x") for i in range(17 - len(parts))]
    body, content_type = multipart(parts + extra)
    status, answer = raw_request(server.port, "POST", "/v1/jobs", body=body,
                                 headers={"Content-Type": content_type, **server.auth})
    assert status == 413 and answer["error"]["limit"] == "max_fields", answer
    body, content_type = multipart(parts + [parts[1]])  # ligands twice: which one would it be?
    status, answer = raw_request(server.port, "POST", "/v1/jobs", body=body,
                                 headers={"Content-Type": content_type, **server.auth})
    assert status == 422 and "ligands" in answer["error"]["message"], answer


def _modes(folder: Path) -> set[tuple[str, str]]:
    return {("dir" if p.is_dir() else "file", oct(stat.S_IMODE(p.stat().st_mode))) for p in [folder, *folder.rglob("*")]}


def test_a_token_servers_job_folders_are_private(server):
    job = server.submit()
    server.wait_until(lambda: server.get(f"/v1/jobs/{job}")["state"] == "done", "the job", 120)
    assert _modes(server.data_dir / "jobs" / job) == {("dir", "0o700"), ("file", "0o600")}
    assert oct(stat.S_IMODE(server.data_dir.stat().st_mode)) == "0o700"
    assert oct(stat.S_IMODE((server.data_dir / "jobs.sqlite").stat().st_mode)) == "0o600"
