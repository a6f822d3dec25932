"""The ``geomol serve`` web application: the API of :mod:`geomol.serve.routes`, the page, the guards.

:func:`create_app` builds a FastAPI app for one :class:`~geomol.serve.settings.ServeSettings`. Starting
it (its lifespan) opens the job store under ``data_dir``, makes it consistent with the folders after
whatever stopped the previous server (:meth:`~geomol.serve.store.JobStore.recover`), starts the worker
pool and queues again the jobs that were waiting. Stopping it lets running jobs finish for a few seconds,
then stops the workers; jobs still waiting stay queued on disk for the next start.

Errors are JSON, ``{"error": {"type", "message", "status"}}`` (plus ``limit`` when a limit was broken),
with the :class:`~geomol.errors.GeomolError` message where there is one; an unexpected exception is
logged with its traceback and answered 500 "internal server error", never with the traceback.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Callable

from fastapi import FastAPI, Form, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from geomol.errors import GeomolError
from geomol.serve.guards import (TOKEN_COOKIE, LoopbackHostGuard, RequestLimits, RequestSlots, SecurityHeaders,
                                 TokenGuard, error_body)
from geomol.serve.pool import QueueFull, WorkerPool
from geomol.serve.routes import Runtime, job_spec, router
from geomol.serve.settings import ServeSettings
from geomol.serve.store import JobStore
from geomol.version import __version__

__all__ = ["create_app", "start_runtime", "STATIC"]

STATIC = Path(__file__).parent / "static"
SHUTDOWN_GRACE_SECONDS = 10.0
_log = logging.getLogger("geomol.serve")


def start_runtime(settings: ServeSettings, on_worker_failure: Callable[[str], None] | None = None) -> Runtime:
    """Open the store, recover it, start the workers and queue again the jobs that were waiting.

    A token-protected server keeps its job folders private (0700, files 0600): its token file must be private too.
    ``on_worker_failure`` is called with the reason if the workers cannot start at all.
    """
    store = JobStore(settings.data_dir, private=settings.token is not None)
    waiting = store.recover()
    pool = WorkerPool(store, settings, on_failure=on_worker_failure)
    pool.start()
    for job_id in waiting:
        pool.submit(job_spec(store.get(job_id), store), admitted=True)
    return Runtime(settings, store, pool)


def _json_error(status: int, kind: str, message: str, headers: dict | None = None, **extra) -> Response:
    return Response(error_body(status, kind, message, **extra), status_code=status, headers=headers,
                    media_type="application/json")


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(GeomolError)
    async def geomol_error(request: Request, exc: GeomolError) -> Response:
        status = getattr(exc, "status", 422)
        limit = getattr(exc, "limit", None)
        return _json_error(status, type(exc).__name__, str(exc), **({"limit": limit} if limit else {}))

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, exc: QueueFull) -> Response:
        return _json_error(503, "QueueFull", str(exc), {"Retry-After": str(exc.retry_after)}, limit="max_queue")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        kind = "PayloadTooLarge" if exc.status_code == 413 else "NotFound" if exc.status_code == 404 else "HTTPError"
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 413:  # the rest of the body is not read: the connection cannot carry another request
            headers["Connection"] = "close"
        return _json_error(exc.status_code, kind, str(exc.detail), headers or None,
                           **({"limit": getattr(exc, "limit", "max_request_bytes")} if exc.status_code == 413 else {}))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or e['loc'][0]}: {e['msg']}"
                             for e in exc.errors())
        return _json_error(422, "InvalidRequest", problems)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        _log.exception("unexpected error answering %s %s", request.method, request.url.path)
        return _json_error(500, "InternalError", "internal server error (the server log has the details)")


def _add_pages(app: FastAPI, settings: ServeSettings) -> None:
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/login", include_in_schema=False)
    def login_page() -> Response:
        return FileResponse(STATIC / "login.html") if settings.token else RedirectResponse("/", 303)

    @app.post("/login", include_in_schema=False)
    def login(request: Request, token: Annotated[str, Form()]) -> Response:
        if not settings.token or not hmac.compare_digest(token.strip().encode(), settings.token.encode()):
            return RedirectResponse("/login?wrong=1", 303)
        response = RedirectResponse("/", 303)
        response.set_cookie(TOKEN_COOKIE, settings.token, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> FileResponse:
        return FileResponse(STATIC / "docs.html")

    try:  # Swagger UI's files from its registry package (the 'serve' extra): the API docs work offline
        from swagger_ui_bundle import swagger_ui_path

        app.mount("/docs-assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")
    except ImportError:
        pass


def create_app(settings: ServeSettings, on_worker_failure: Callable[[str], None] | None = None) -> FastAPI:
    """The web application for ``settings`` (start it with uvicorn, or with FastAPI's TestClient);
    ``on_worker_failure``: see :func:`start_runtime`."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        runtime = await asyncio.to_thread(start_runtime, settings, on_worker_failure)
        app.state.runtime = runtime
        try:
            yield
        finally:
            await asyncio.to_thread(runtime.pool.stop, SHUTDOWN_GRACE_SECONDS)
            runtime.store.close()

    app = FastAPI(title="geomol serve", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Binding affinities of ligand series with geomol's affinity models: submit a "
                              "receptor and ligands (posed, or SMILES with a reference pose), follow the job, "
                              "download the ranked table, the poses and the plot.")
    app.include_router(router)
    _add_error_handlers(app)
    _add_pages(app, settings)
    # the last added is the outermost: headers on every answer, then limits, then who may ask, then a slot
    limits = settings.limits
    app.add_middleware(RequestSlots, max_requests=limits.max_requests)
    if settings.token:
        app.add_middleware(TokenGuard, token=settings.token)
    else:
        app.add_middleware(LoopbackHostGuard)
    app.add_middleware(RequestLimits, max_bytes=limits.max_request_bytes, seconds=limits.request_seconds,
                       max_fields=limits.max_fields)
    app.add_middleware(SecurityHeaders)
    return app
