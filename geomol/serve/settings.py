"""How a ``geomol serve`` instance runs: where it listens, who may call it, and its limits.

Every limit has one default here (``docs/serve.md`` says why each value was chosen); the command's options
override them. Nothing in this module imports torch: the web process stays small, the worker processes
hold the models.
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field, replace
from os import PathLike
from pathlib import Path

from geomol.errors import ConfigError

__all__ = ["Limits", "ServeSettings", "read_token", "is_loopback", "MIN_TOKEN_LENGTH"]

MIN_TOKEN_LENGTH = 16
"""Characters a token must have at least: a short token could be guessed by trying."""

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Limits:
    """Bounds on what one request, one connection or one job may take.

    Per request and job:
        max_request_bytes: bytes of one request body, and bytes of all its files together once any gzip is
            undone (one budget per request, charged while decompressing).
        max_fields: form fields and files in one request (counted as the body arrives).
        max_ligands: ligands (SDF/MOL2 records, PDBQT models, SMILES lines) in one job.
        request_seconds: seconds from a request's headers to its answer, the upload of its body included (a
            client that sends its body too slowly is cut off with 408).
        max_queue: jobs waiting for a worker; one more is answered 503 with ``Retry-After``.
        job_seconds: wall-clock seconds one job may run in its worker before the worker is stopped and
            the job fails with the reason.

    Per connection (:mod:`geomol.serve.connections`):
        header_seconds: seconds a connection may take to send a request's headers once opened (a client that
            sends nothing, or its headers a byte at a time, is disconnected).
        max_connections: open connections at once; max_client_connections: open connections of one client
            address. A new connection beyond either closes the oldest one still waiting for its headers (idle
            sockets never keep anyone out); only when none waits is it refused with 503.
        max_requests: requests being answered at once (health checks aside): with ``max_request_bytes``, bounds
            the memory uploads in flight take. One more is answered 503 with ``Retry-After``.
    """

    max_request_bytes: int = 32 * 1024 * 1024
    max_ligands: int = 1000
    max_queue: int = 32
    job_seconds: float = 1800.0
    request_seconds: float = 60.0
    max_fields: int = 16
    header_seconds: float = 10.0
    max_connections: int = 256
    max_client_connections: int = 32
    max_requests: int = 64

    def __post_init__(self):
        if self.max_request_bytes < 1024 or self.max_ligands < 1 or self.max_queue < 0:
            raise ConfigError("limits: max_request_bytes ≥ 1024, max_ligands ≥ 1 and max_queue ≥ 0")
        if self.job_seconds <= 0 or self.request_seconds <= 0 or self.header_seconds <= 0:
            raise ConfigError("limits: job, request and header time limits must be > 0 seconds")
        if min(self.max_fields, self.max_connections, self.max_client_connections, self.max_requests) < 1:
            raise ConfigError("limits: fields, connections, connections per client and requests at once must be ≥ 1")


@dataclass(frozen=True)
class ServeSettings:
    """One server: address, default model, worker processes, data folder, token and limits.

    Attributes:
        host, port: where the HTTP server listens (loopback by default).
        model: the shipped model jobs use when they name none (a name from ``geomol.api.list_models``).
        workers: worker processes predicting in parallel (each holds its own copy of the models).
        threads: torch threads per worker.
        data_dir: job inputs, results and the job database (``jobs.sqlite``).
        token: the shared secret every request must carry (None: no token, loopback only).
        limits: :class:`Limits`.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    model: str = "default"
    workers: int = 1
    threads: int = 1
    data_dir: Path = field(default_factory=lambda: Path("geomol-serve"))
    token: str | None = None
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self):
        object.__setattr__(self, "data_dir", Path(self.data_dir))
        if self.workers < 1 or self.threads < 1:
            raise ConfigError("--workers and --threads must be ≥ 1")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port {self.port} is not a TCP port (0–65535)")
        if self.token is not None and len(self.token) < MIN_TOKEN_LENGTH:
            raise ConfigError(f"the token has {len(self.token)} characters; use at least {MIN_TOKEN_LENGTH} "
                              "random ones (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
        if self.token is None and not is_loopback(self.host):
            raise ConfigError(f"--host {self.host} is reachable from other machines: give --token-file (a file "
                              "holding the shared secret every request must send) or listen on 127.0.0.1")

    def with_limits(self, **changes) -> "ServeSettings":
        """A copy with some limits changed (``settings.with_limits(max_queue=2)``)."""
        return replace(self, limits=replace(self.limits, **changes))


def is_loopback(host: str) -> bool:
    """True for a host name or address that only this machine can reach (``localhost``, ``127.x``, ``::1``)."""
    if host.lower() in LOOPBACK_NAMES:  # host names are case-insensitive (LOCALHOST)
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(path: str | PathLike) -> str:
    """The token in ``path`` (its first line, surrounding spaces removed).

    Raises:
        ConfigError: missing or unreadable file, an empty token, or a file others may read (mode bits for
            group or others set), since anyone who reads it can call the server.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the token file: {exc}", source=path) from None
    if os.name == "posix" and mode & 0o077:
        raise ConfigError(f"the token file may be read by others (mode {oct(mode & 0o777)}); run chmod 600 on it",
                          source=path)
    token = (text.splitlines() or [""])[0].strip()
    if not token:
        raise ConfigError("the token file is empty", source=path)
    return token
