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
  or as soon as the bytes read pass the limit); a request not answered within ``request_seconds``
  (a slow upload, say) gets 408.
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

__all__ = ["TokenGuard", "LoopbackHostGuard", "RequestLimits", "SecurityHeaders", "error_body", "TOKEN_COOKIE",
           "PUBLIC_PATHS"]

TOKEN_COOKIE = "geomol_token"
PUBLIC_PATHS = ("/login", "/static/login.js", "/static/style.css")
"""What a request without the token may fetch: the login form and what it needs."""
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
            if host not in LOOPBACK_NAMES:
                return await _send_error(send, 421, "MisdirectedRequest", f"this server answers requests to "
                                         f"localhost only, not to {host!r}; to serve other machines, start it "
                                         "with --token-file (see docs/serve.md)")
        await self.app(scope, receive, send)


class RequestLimits:
    """Refuse bodies over ``max_bytes`` (413) and requests slower than ``seconds`` (408)."""

    def __init__(self, app: ASGIApp, max_bytes: int, seconds: float):
        self.app, self.max_bytes, self.seconds = app, max_bytes, seconds

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = _header(scope, b"content-length")
        too_large = f"the request body exceeds this server's limit of {self.max_bytes} bytes"
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await _send_error(send, 413, "PayloadTooLarge", too_large, limit="max_request_bytes")
        received, started = 0, False

        async def counting_receive():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise BodyTooLarge(too_large)
            return message

        async def tracking_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await asyncio.wait_for(self.app(scope, counting_receive, tracking_send), self.seconds)
        except BodyTooLarge:
            if not started:
                await _send_error(send, 413, "PayloadTooLarge", too_large, limit="max_request_bytes")
        except asyncio.TimeoutError:
            if not started:
                await _send_error(send, 408, "RequestTimeout", f"the request took longer than this server's limit "
                                  f"of {self.seconds:g} s", limit="request_seconds")


class BodyTooLarge(HTTPException):
    """Raised while a body is read past the limit (FastAPI answers it as the 413 it is)."""

    def __init__(self, message: str):
        super().__init__(413, message)


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
