"""Connections before they are requests: a time limit on headers and a bound on connections, per client too.

uvicorn keeps a connection that sends nothing open for ever, and its ``limit_concurrency`` counts such
connections: 64 idle sockets made every other client (health checks, authenticated users) get 503. Here the
HTTP protocol of uvicorn (h11) is given three rules, all before any byte of a request reaches the application,
so a token-protected server is protected before authentication too:

* **Headers in time**: a connection must complete a request's headers within ``header_seconds`` of opening
  (or, kept alive, within the keep-alive time plus ``header_seconds`` of its previous answer); otherwise it is
  closed. A client that sends nothing, or its headers a byte at a time, holds nothing for long. The body's
  time is bounded by the request time limit (:class:`~geomol.serve.guards.RequestLimits`).
* **Bounded per client and in all**: at most ``max_client_connections`` connections of one client address and
  ``max_connections`` in all.
* **Idle ones give way**: a new connection beyond either bound closes the oldest connection (of that address,
  or of any) still waiting for its headers; only when every connection is busy with a request is the new one
  refused, with 503 and ``Retry-After``. So idle sockets never keep a new client out, even from their own address.

Requests being answered at once are bounded separately, after authentication
(:class:`~geomol.serve.guards.RequestSlots`).
"""
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from geomol.serve.settings import Limits

__all__ = ["ConnectionRegistry", "guarded_protocol"]

REFUSED_RETRY_SECONDS = 5


class ConnectionRegistry:
    """The open connections of one server by client address, to bound them and to find the idle ones."""

    def __init__(self, limits: "Limits"):
        self.limits = limits
        self._by_client: dict[str, list["_GuardedH11Protocol"]] = {}

    @property
    def count(self) -> int:
        return sum(len(connections) for connections in self._by_client.values())

    def admit(self, connection: "_GuardedH11Protocol") -> bool:
        """Register a new connection, closing an idle one to make room where a bound is reached; False: refuse it."""
        same_client = self._by_client.get(connection.client_address, [])
        if len(same_client) >= self.limits.max_client_connections and not self._close_oldest_idle(same_client):
            return False
        if self.count >= self.limits.max_connections:
            everyone = [c for connections in self._by_client.values() for c in connections]
            if not self._close_oldest_idle(everyone):
                return False
        self._by_client.setdefault(connection.client_address, []).append(connection)
        return True

    def release(self, connection: "_GuardedH11Protocol") -> None:
        connections = self._by_client.get(connection.client_address, [])
        if connection in connections:
            connections.remove(connection)
            if not connections:
                del self._by_client[connection.client_address]

    def _close_oldest_idle(self, connections: list["_GuardedH11Protocol"]) -> bool:
        idle = [c for c in connections if c.waiting_since is not None]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.waiting_since)
        self.release(oldest)  # at once: its connection_lost comes later
        oldest.close()
        return True


def _refusal() -> bytes:
    body = json.dumps({"error": {"type": "TooManyConnections", "status": 503, "limit": "max_connections",
                                 "message": "this server has no free connection for your address now; try again "
                                            "shortly"}}).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"retry-after: %d\r\ncontent-length: %d\r\n\r\n" % (REFUSED_RETRY_SECONDS, len(body)) + body)


class _GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the rules of the module notes (``registry`` is set per server)."""

    registry: ConnectionRegistry

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.waiting_since: float | None = None
        self._header_timer = None
        super().connection_made(transport)
        self.client_address = self.client[0] if self.client else ""
        if not self.registry.admit(self):
            transport.write(_refusal())
            transport.close()
            return
        self._await_headers(self.registry.limits.header_seconds)

    def connection_lost(self, exc) -> None:
        self.registry.release(self)
        self._stop_header_timer()
        self.waiting_since = None
        super().connection_lost(exc)

    # uvicorn sets ``cycle`` when a request's headers are complete: from then on the request time limit applies
    @property
    def cycle(self):
        return self.__dict__.get("_cycle")

    @cycle.setter
    def cycle(self, value) -> None:
        self.__dict__["_cycle"] = value
        if value is not None:
            self.waiting_since = None
            self._stop_header_timer()

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():  # before uvicorn starts a pipelined next request
            self._await_headers(self.timeout_keep_alive + self.registry.limits.header_seconds)
        super().on_response_complete()

    def close(self) -> None:
        """Close a connection that waits for its headers (timed out, or making room for a new one)."""
        self._stop_header_timer()
        if not self.transport.is_closing():
            self.transport.close()

    def _await_headers(self, seconds: float) -> None:
        self._stop_header_timer()
        self.waiting_since = time.monotonic()
        self._header_timer = self.loop.call_later(seconds, self._headers_late)

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.waiting_since is not None:
            self.close()

    def _stop_header_timer(self) -> None:
        if getattr(self, "_header_timer", None) is not None:
            self._header_timer.cancel()
            self._header_timer = None


def guarded_protocol(limits: "Limits") -> type[H11Protocol]:
    """The HTTP protocol class for uvicorn (``uvicorn.Config(http=...)``) of one server with ``limits``."""
    return type("GuardedH11Protocol", (_GuardedH11Protocol,), {"registry": ConnectionRegistry(limits)})
