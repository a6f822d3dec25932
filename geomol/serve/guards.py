"""What every request passes before it reaches a handler: the token, the host, size and time limits, headers.

Plain ASGI middleware (no handler runs for a refused request, and no body is read for one):

* :class:`TokenGuard` — with a token, every request but the login form carries it, as
  ``Authorization: Bearer <token>`` or in the ``geomol_token`` cookie the login form sets (HttpOnly,
  SameSite=Strict); compared in constant time. A page request without it is sent to ``/login``;
  anything else gets 401.
* :class:`LoopbackHostGuard` — without a token (loopback only), the ``Host`` header must name this
  machine, so that a web page elsewhere cannot reach the server through a DNS name that points at
  127.0.0.1 (DNS rebinding).
* :class:`RequestLimits` — a body over ``max_request_bytes`` is refused with 413 (from ``Content-Length``,
  or as soon as the bytes read pass the limit), and so is a form of more than ``max_fields`` fields and
  files (counted as the body arrives, before it is parsed); a request not answered within
  ``request_seconds`` (a slow upload, say) gets 408. These refusals close the connection.
* :class:`RequestSlots` — at most ``max_requests`` requests are answered at once (503 with ``Retry-After``
  beyond); health checks always get through. It sits behind the token check, so only callers with the
  token take a slot.
* :class:`SecurityHeaders` — a strict Content-Security-Policy (scripts, styles and images from this
  server only), no MIME sniffing, no framing, no referrer, no caching of API answers.

Every refusal is a JSON body ``{"error": {"type", "message", "status"}}`` like the API's other errors.
"""
from __future__ import annotations

import asyncio
import hmac
import json
from http.cookies import SimpleCookie
from typing import Any, Awaitable, Callable

from starlette.exceptions import HTTPException

from geomol.serve.settings import LOOPBACK_NAMES

__all__ = ["TokenGuard", "LoopbackHostGuard", "RequestLimits", "RequestSlots", "SecurityHeaders", "error_body",
           "TOKEN_COOKIE", "PUBLIC_PATHS", "HEALTH_PATH"]

TOKEN_COOKIE = "geomol_token"
PUBLIC_PATHS = ("/login", "/static/login.js", "/static/style.css")
"""What a request without the token may fetch: the login form and what it needs."""
HEALTH_PATH = "/healthz"
_CLOSE = [(b"connection", b"close")]
Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]


def error_body(status: int, kind: str, message: str, **extra: Any) -> bytes:
    return json.dumps({"error": {"type": kind, "message": message, "status": status, **extra}}).encode()


async def _send_error(send, status: int, kind: str, message: str, headers: list | None = None, **extra) -> None:
    body = error_body(status, kind, message, **extra)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def _host_name(value: str) -> str:
    """The name in a ``Host`` header, without the port (``[::1]:8000`` → ``::1``)."""
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class TokenGuard:
    """Refuse a request without the token (see the module notes)."""

    def __init__(self, app: ASGIApp, token: str):
        self.app, self._token = app, token.encode()

    def _presented(self, scope: Scope) -> bytes | None:
        authorization = _header(scope, b"authorization") or ""
        if authorization.lower().startswith("bearer "):
            return authorization[7:].strip().encode()
        cookie = SimpleCookie(_header(scope, b"cookie") or "")
        return cookie[TOKEN_COOKIE].value.encode() if TOKEN_COOKIE in cookie else None

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            return await self.app(scope, receive, send)
        presented = self._presented(scope)
        if presented is not None and hmac.compare_digest(presented, self._token):
            return await self.app(scope, receive, send)
        if scope["method"] == "GET" and scope["path"] == "/":
            await send({"type": "http.response.start", "status": 303, "headers": [(b"location", b"/login")]})
            return await send({"type": "http.response.body", "body": b""})
        message = "a token is required" if presented is None else "wrong token"
        await _send_error(send, 401, "Unauthorized", f"{message}: send 'Authorization: Bearer <token>' "
                          "(the token in the server's --token-file) or log in at /login",
                          [(b"www-authenticate", b"Bearer")])


class LoopbackHostGuard:
    """Refuse a request whose ``Host`` is not a loopback name (see the module notes)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] == "http":
            host = _host_name(_header(scope, b"host") or "")
            if host.lower() not in LOOPBACK_NAMES:  # host names are case-insensitive: LOCALHOST is localhost
                return await _send_error(send, 421, "MisdirectedRequest", f"this server answers requests to "
                                         f"localhost only, not to {host!r}; to serve other machines, start it "
                                         "with --token-file (see docs/serve.md)")
        await self.app(scope, receive, send)


class FormFieldCounter:
    """Counts the fields and files of a form body as it arrives (multipart delimiters, or ``&`` of a URL-encoded
    form), so that a form of thousands of tiny parts is refused before anything parses it."""

    def __init__(self, content_type: str):
        content_type = content_type.lower()
        boundary = content_type.partition("boundary=")[2].split(";")[0].strip().strip('"')
        self._mark = (b"--" + boundary.encode("latin-1")) if content_type.startswith("multipart/") and boundary \
            else b"&" if content_type.startswith("application/x-www-form-urlencoded") else None
        self._marks, self._tail, self._urlencoded = 0, b"", self._mark == b"&"

    def fields(self, chunk: bytes) -> int:
        """Fields (and files) seen so far, counting ``chunk``."""
        if self._mark is None or not chunk:
            return 0
        data = self._tail + chunk
        self._marks += data.count(self._mark) - self._tail.count(self._mark)
        self._tail = data[-(len(self._mark) - 1):] if len(self._mark) > 1 else b""
        return self._marks + 1 if self._urlencoded else max(0, self._marks - 1)  # the last delimiter ends the form


class RequestLimits:
    """Refuse bodies over ``max_bytes`` and forms over ``max_fields`` (413), and requests slower than ``seconds``
    (408); each refusal closes the connection."""

    def __init__(self, app: ASGIApp, max_bytes: int, seconds: float, max_fields: int):
        self.app, self.max_bytes, self.seconds, self.max_fields = app, max_bytes, seconds, max_fields

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = _header(scope, b"content-length")
        too_large = f"the request body exceeds this server's limit of {self.max_bytes} bytes"
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await _send_error(send, 413, "PayloadTooLarge", too_large, _CLOSE, limit="max_request_bytes")
        received, started = 0, False
        counter = FormFieldCounter(_header(scope, b"content-type") or "")

        async def counting_receive():
            nonlocal received
            message = await receive()
            body = message.get("body", b"")
            received += len(body)
            if received > self.max_bytes:
                raise BodyTooLarge(too_large, "max_request_bytes")
            if counter.fields(body) > self.max_fields:
                raise BodyTooLarge(f"the form has more than {self.max_fields} fields and files, this server's "
                                   "limit per request", "max_fields")
            return message

        async def tracking_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await asyncio.wait_for(self.app(scope, counting_receive, tracking_send), self.seconds)
        except BodyTooLarge as exc:
            if not started:
                await _send_error(send, 413, "PayloadTooLarge", exc.detail, _CLOSE, limit=exc.limit)
        except asyncio.TimeoutError:
            if not started:
                await _send_error(send, 408, "RequestTimeout", f"the request took longer than this server's limit "
                                  f"of {self.seconds:g} s", _CLOSE, limit="request_seconds")


class RequestSlots:
    """Answer at most ``max_requests`` requests at once (503 with ``Retry-After`` beyond); health checks always."""

    RETRY_SECONDS = 2

    def __init__(self, app: ASGIApp, max_requests: int):
        self.app, self.max_requests, self.busy = app, max_requests, 0

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] == HEALTH_PATH:
            return await self.app(scope, receive, send)
        if self.busy >= self.max_requests:
            return await _send_error(send, 503, "ServerBusy", f"this server is answering {self.max_requests} requests "
                                     "already; try again shortly", [(b"retry-after", str(self.RETRY_SECONDS).encode())],
                                     limit="max_requests")
        self.busy += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.busy -= 1


class BodyTooLarge(HTTPException):
    """Raised while a body is read past a limit (FastAPI answers it as the 413 it is); ``limit`` names it."""

    def __init__(self, message: str, limit: str):
        super().__init__(413, message)
        self.limit = limit


_CSP = (b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
        b"base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


_DOCS_CSP = _CSP.replace(b"style-src 'self'", b"style-src 'self' 'unsafe-inline'")  # Swagger UI styles inline


class SecurityHeaders:
    """Add the security headers of the module notes to every response."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        api = scope["path"].startswith("/v1/")

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0] != b"cache-control" or not api]
                csp = _DOCS_CSP if scope["path"] == "/docs" else _CSP
                headers += [(b"content-security-policy", csp), (b"x-content-type-options", b"nosniff"),
                            (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer")]
                if api:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
