"""Serve the affinity predictor over HTTP: an API (``/v1``) and a page, for a team or for yourself.

Examples::

    geomol serve                                    # http://127.0.0.1:8000, this machine only
    geomol serve --workers 4 --data-dir /srv/geomol --model default
    geomol serve --host 0.0.0.0 --token-file /etc/geomol/token --port 8000   # other machines: a token is required

Jobs run in ``--workers`` worker processes; at most ``--max-queue`` more wait (then 503 with Retry-After).
Job inputs, results and states are kept under ``--data-dir`` and survive a restart. The limits and how
to run it behind a reverse proxy with TLS are in ``docs/serve.md``. Needs the optional extra ``serve``
(``pip install 'geomol[serve]'``).
"""
from __future__ import annotations

import argparse
import sys

from geomol.errors import ConfigError

THREADS_IN_WORKERS = True
"""``--threads`` sets each worker's torch threads; the web process itself never imports torch."""

_MIB = 1024 * 1024
KEEP_ALIVE_SECONDS = 30
"""Idle seconds before the server closes a kept-alive connection: longer than a client waits after a 503 (its
Retry-After, typically a few seconds), so that a client reusing its connection does not meet the server closing
it at the same instant (uvicorn's default, 5 s, made 2 of 60 POSTs fail with 'connection reset' at 16 users)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from geomol.serve.settings import Limits

    limits = Limits()
    where = parser.add_argument_group("where and who")
    where.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this "
                       "machine only; any other needs --token-file)")
    where.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    where.add_argument("--token-file", metavar="FILE", help="file whose first line is the shared token every "
                       "request must carry (Authorization: Bearer, or the page's login); mode 600")
    work = parser.add_argument_group("work")
    work.add_argument("--model", default="default", help="model jobs use when they name none (default: the "
                      "shipped default model; see GET /v1/models)")
    work.add_argument("--workers", type=int, default=1, help="worker processes predicting in parallel (default 1; "
                      "about one per free core)")
    work.add_argument("--threads", type=int, default=1, help="torch threads per worker (default 1)")
    work.add_argument("--data-dir", default="geomol-serve", metavar="DIR",
                      help="job inputs, results and the job database (default ./geomol-serve)")
    bounds = parser.add_argument_group("limits (docs/serve.md says why these defaults)")
    bounds.add_argument("--max-upload-mb", type=float, default=limits.max_request_bytes / _MIB,
                        help=f"MiB in one request, all files together (default {limits.max_request_bytes // _MIB})")
    bounds.add_argument("--max-ligands", type=int, default=limits.max_ligands,
                        help=f"ligands in one job (default {limits.max_ligands})")
    bounds.add_argument("--max-queue", type=int, default=limits.max_queue,
                        help=f"jobs waiting for a worker before 503 (default {limits.max_queue})")
    bounds.add_argument("--job-time-limit", type=float, default=limits.job_seconds, metavar="S",
                        help=f"seconds one job may run (default {limits.job_seconds:g})")
    bounds.add_argument("--request-time-limit", type=float, default=limits.request_seconds, metavar="S",
                        help=f"seconds one HTTP request may take, upload included (default {limits.request_seconds:g})")
    bounds.add_argument("--header-time-limit", type=float, default=limits.header_seconds, metavar="S",
                        help=f"seconds a connection may take to send a request's headers (default "
                             f"{limits.header_seconds:g})")
    bounds.add_argument("--max-connections", type=int, default=limits.max_connections,
                        help=f"open connections at once (default {limits.max_connections})")
    bounds.add_argument("--max-client-connections", type=int, default=limits.max_client_connections,
                        help=f"open connections of one client address (default {limits.max_client_connections}; "
                             "behind a proxy, its address: raise it to the proxy's connections)")


def settings_from(args: argparse.Namespace):
    """:class:`~geomol.serve.settings.ServeSettings` from the command's arguments (token read, limits checked)."""
    from geomol.serve.settings import Limits, ServeSettings, read_token

    limits = Limits(max_request_bytes=int(args.max_upload_mb * _MIB), max_ligands=args.max_ligands,
                    max_queue=args.max_queue, job_seconds=args.job_time_limit,
                    request_seconds=args.request_time_limit, header_seconds=args.header_time_limit,
                    max_connections=args.max_connections, max_client_connections=args.max_client_connections)
    token = read_token(args.token_file) if args.token_file else None
    return ServeSettings(host=args.host, port=args.port, model=args.model, workers=args.workers,
                         threads=args.threads, data_dir=args.data_dir, token=token, limits=limits)


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from geomol.serve.app import create_app
        from geomol.serve.connections import guarded_protocol
    except ImportError as exc:
        raise ConfigError(f"geomol serve needs the optional extra 'serve' ({exc.name} is missing): "
                          "pip install 'geomol[serve]'") from None
    settings = settings_from(args)
    where = f"http://{'[' + settings.host + ']' if ':' in settings.host else settings.host}:{settings.port}"
    print(f"geomol serve: {where} (page /, API /v1, docs /docs); {settings.workers} worker(s), data in "
          f"{settings.data_dir}" + ("; token required" if settings.token else "; no token: this machine only"),
          file=sys.stderr, flush=True)
    failures: list[str] = []

    def workers_failed(reason: str) -> None:  # from the pool's thread: stop serving, exit with an error
        failures.append(reason)
        server.should_exit = True

    # limit_concurrency stays off: it counted idle connections and refused everyone else (geomol.serve.connections)
    config = uvicorn.Config(create_app(settings, on_worker_failure=workers_failed), host=settings.host,
                            port=settings.port, log_level="info", proxy_headers=True, forwarded_allow_ips="127.0.0.1",
                            timeout_keep_alive=KEEP_ALIVE_SECONDS, timeout_graceful_shutdown=15,
                            http=guarded_protocol(settings.limits))
    server = uvicorn.Server(config)
    server.run()
    if failures:
        raise ConfigError(f"stopped, {failures[0]}")
    return 0
