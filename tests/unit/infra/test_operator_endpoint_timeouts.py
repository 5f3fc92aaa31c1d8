"""The operator endpoints' socket limits (observability/server.py): a connection that sends
nothing is closed after the socket timeout, and connections past the bound are closed at
once, so idle or slow clients cannot hold the server's threads; scrapes go on meanwhile."""

from __future__ import annotations

import socket
import time
import urllib.request

from cronlog.infra.observability.registry import RoleMetrics
from cronlog.infra.observability.server import (
    MAX_CONNECTIONS,
    SOCKET_TIMEOUT_SECONDS,
    OperatorEndpoints,
    Readiness,
)


def _scrape(url: str) -> int:
    with urllib.request.urlopen(url + "/healthz", timeout=5) as answer:
        return int(answer.status)


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed the connection (EOF), None if it did not."""
    sock.settimeout(seconds)
    started = time.monotonic()
    try:
        while sock.recv(1024):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def test_the_defaults_bound_every_connection() -> None:
    assert 0 < SOCKET_TIMEOUT_SECONDS <= 30
    assert 0 < MAX_CONNECTIONS <= 64


def test_an_idle_connection_is_closed_after_the_socket_timeout() -> None:
    endpoints = OperatorEndpoints(RoleMetrics("worker"), Readiness, "127.0.0.1", 0,
                                  socket_timeout=0.5).start()
    try:
        host, port = endpoints.address
        idle = socket.create_connection((host, port))
        half = socket.create_connection((host, port))
        half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        with idle, half:
            assert _scrape(endpoints.url) == 200
            for sock in (idle, half):
                waited = _closed_within(sock, 5.0)
                assert waited is not None and waited < 3.0
    finally:
        endpoints.stop()


def test_connections_past_the_bound_are_closed_and_scrapes_go_on_after() -> None:
    endpoints = OperatorEndpoints(RoleMetrics("worker"), Readiness, "127.0.0.1", 0,
                                  socket_timeout=4.0, max_connections=3).start()
    try:
        host, port = endpoints.address
        held = [socket.create_connection((host, port)) for _ in range(3)]
        time.sleep(0.2)
        extra = socket.create_connection((host, port))
        with extra:
            # Closed at once, not after the 4 s timeout: a bound far from both, as make test
            # runs this suite at the lowest CPU priority.
            waited = _closed_within(extra, 3.5)
            assert waited is not None and waited < 2.0
        for sock in held:
            assert _closed_within(sock, 10.0) is not None
            sock.close()
        assert _scrape(endpoints.url) == 200
    finally:
        endpoints.stop()
