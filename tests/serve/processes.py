"""A real ``geomol serve`` process for the tests that need real sockets, and raw HTTP over them.

:class:`Server` starts the command (the ``geomol`` console script next to this Python, as a user runs it, or
``python -m geomol``) in its own process group on a free loopback port; :func:`raw_request` speaks HTTP/1.1 over
a plain socket, from any loopback source address (``127.0.0.2`` is another client to the server).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.serve.conftest import EXAMPLE

START_TIMEOUT = 120.0
CONSOLE_SCRIPT = Path(sys.executable).with_name("geomol")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def multipart(parts: list[tuple[str, str | None, bytes]], boundary: str = "geomolboundary") -> tuple[bytes, str]:
    """A multipart/form-data body of ``(field, file name or None, content)`` parts, and its Content-Type."""
    body = b""
    for name, file_name, data in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{file_name}"' if file_name else "")
        body += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + data + b"\r\n"
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def example_parts(ligands: bytes | None = None) -> list[tuple[str, str, bytes]]:
    """The example receptor and ligands (or ``ligands``) as multipart parts."""
    return [("receptor", "protein.pdb", (EXAMPLE / "tnks2_protein.pdb").read_bytes()),
            ("ligands", "ligands.sdf", ligands if ligands is not None else (EXAMPLE / "tnks2_ligands.sdf").read_bytes())]


def raw_request(port: int, method: str, path: str, *, headers: dict | None = None, body: bytes = b"",
                source: str = "127.0.0.1", timeout: float = 30.0) -> tuple[int, dict]:
    """One request on a new connection from ``source``: the status and the JSON body (``{}`` if none)."""
    head = {"Host": f"127.0.0.1:{port}", "Connection": "close", "Content-Length": str(len(body)), **(headers or {})}
    data = f"{method} {path} HTTP/1.1\r\n".encode() + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as connection:
        connection.sendall(data + b"\r\n" + body)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    payload = rest.partition(b"\r\n\r\n")[2]
    try:
        parsed = json.loads(payload) if payload else {}
    except ValueError:
        parsed = {}
    return int(status_line.split()[1]), parsed


def closed_by_server(connection: socket.socket, within: float) -> bool:
    """Whether the server closes ``connection`` within ``within`` seconds (whatever it sends first)."""
    connection.settimeout(0.2)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if connection.recv(65536) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:  # reset
            return True
    return False


class Server:
    """``geomol serve`` in its own process group on a free loopback port (``token``: sent with every request)."""

    def __init__(self, data_dir: Path, log: Path, *options: str, token: str | None = None, cwd: Path | None = None,
                 env: dict | None = None, console_script: bool = False):
        self.port, self.token, self.data_dir = free_port(), token, data_dir
        self.url = f"http://127.0.0.1:{self.port}"
        program = [str(CONSOLE_SCRIPT)] if console_script else [sys.executable, "-m", "geomol"]
        command = [*program, "serve", "--port", str(self.port), "--data-dir", str(data_dir), *options]
        self.log_path, self.log = log, open(log, "ab")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                        cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})

    @property
    def auth(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def get(self, path: str) -> dict | list:
        request = urllib.request.Request(self.url + path, headers=self.auth)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def wait_until(self, check, what: str, timeout: float = START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (f"the server exited ({self.process.returncode}) waiting for {what}: "
                                                 f"{self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                found = check()
            except OSError:
                found = None
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}: {self.log_path.read_text(errors='replace')[-2000:]}")

    def wait_ready(self) -> None:
        self.wait_until(lambda: self.get("/healthz")["status"] == "ok", "the first worker")

    def submit(self, ligands: bytes | None = None) -> str:
        body, content_type = multipart(example_parts(ligands))
        request = urllib.request.Request(self.url + "/v1/jobs", data=body, method="POST",
                                         headers={"Content-Type": content_type, **self.auth})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())["id"]

    def kill_group(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        self.log.close()
