"""A role's operator endpoints on one HTTP port: /metrics (Prometheus text), /healthz (the
process answers) and /readyz (the role can do its work, per a callback the role supplies:
200, or 503 with what is not ready). Bound to 127.0.0.1 unless configured otherwise;
nothing here writes, and nothing answers but these three paths."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily

from cronlog.infra.config import Settings
from cronlog.infra.observability.catalogue import READY, Role
from cronlog.infra.observability.registry import RoleMetrics, gauge_family

log = logging.getLogger(__name__)

# A client that connects and then sends or reads nothing is cut off after this long, and at
# most this many are served at once (more are closed at once): a scrape takes milliseconds,
# and a slow or idle connection must not hold a thread for ever (slowloris).
SOCKET_TIMEOUT_SECONDS = 10.0
MAX_CONNECTIONS = 16


class _BoundedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 max_connections: int) -> None:
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            # The slot first, then the close: a client that sees its connection closed
            # finds its slot free (releasing after the close let a scrape right after an
            # idle connection's timeout be turned away as one past the bound).
            self._slots.release()
            self.shutdown_request(request)


@dataclass(frozen=True)
class Readiness:
    """What keeps a role from being ready, in a few words each; nothing means ready."""

    not_ready: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return not self.not_ready


ReadinessCheck = Callable[[], Readiness]


class MetricsPortUnavailable(RuntimeError):
    """The configured metrics address cannot be bound."""


def _checked(check: ReadinessCheck) -> Readiness:
    # A failing check is a not-ready role, never a failing scrape.
    try:
        return check()
    except Exception as exc:
        log.warning("readiness check failed: %s", exc)
        return Readiness((f"readiness check failed: {type(exc).__name__}",))


class _ReadyCollector:
    def __init__(self, role: str, check: ReadinessCheck) -> None:
        self._role = role
        self._check = check

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ready = _checked(self._check).ready
        yield gauge_family(READY, [((self._role,), 1.0 if ready else 0.0)])


class OperatorEndpoints:
    """Serves the endpoints from a daemon thread; start() binds, or raises naming the
    setting to change."""

    def __init__(self, metrics: RoleMetrics, readiness: ReadinessCheck, host: str, port: int,
                 setting: str = "metrics port", *,
                 socket_timeout: float = SOCKET_TIMEOUT_SECONDS,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        self._socket_timeout = socket_timeout
        self._max_connections = max_connections
        self._metrics = metrics
        self._readiness = readiness
        self._host = host
        self._port = port
        self._setting = setting
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        metrics.add_collector(_ReadyCollector(metrics.role, readiness))

    @property
    def address(self) -> tuple[str, int]:
        if self._server is None:
            return self._host, self._port
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def start(self) -> OperatorEndpoints:
        try:
            server = _BoundedServer((self._host, self._port), self._handler_class(),
                                    self._max_connections)
        except OSError as exc:
            raise MetricsPortUnavailable(
                f"{self._setting}: cannot listen on {self._host}:{self._port}: "
                f"{exc.strerror or exc}") from exc
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="operator-endpoints",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            # The socket's timeout (StreamRequestHandler.setup): a read or write waiting
            # longer ends the connection.
            timeout = endpoints._socket_timeout

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, CONTENT_TYPE_LATEST,
                                 generate_latest(endpoints._metrics.registry))
                elif path == "/healthz":
                    self._json(200, {"alive": True, "role": endpoints._metrics.role})
                elif path == "/readyz":
                    readiness = _checked(endpoints._readiness)
                    body: dict[str, object] = {"ready": readiness.ready,
                                               "role": endpoints._metrics.role}
                    if not readiness.ready:
                        body["not_ready"] = list(readiness.not_ready)
                    self._json(200 if readiness.ready else 503, body)
                else:
                    self._json(404, {"error": "not found: /metrics, /healthz or /readyz"})

            def _json(self, status: int, body: dict[str, object]) -> None:
                self._answer(status, "application/json", json.dumps(body).encode() + b"\n")

            def _answer(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                # A scrape every few seconds is not news; the role's own log stays readable.
                log.debug("%s " + format, self.address_string(), *args)

        return Handler


def port_setting(role: Role) -> str:
    return f"CRONLOG_{role.upper()}_METRICS_PORT"


def start_role_endpoints(settings: Settings, metrics: RoleMetrics,
                         readiness: ReadinessCheck) -> OperatorEndpoints | None:
    """The role's endpoints on its configured port, started; None when its port is 0."""
    port = {"api": settings.api_metrics_port, "scheduler": settings.scheduler_metrics_port,
            "worker": settings.worker_metrics_port,
            "projector": settings.projector_metrics_port,
            "notifier": settings.notifier_metrics_port}[metrics.role]
    if not port:
        return None
    endpoints = OperatorEndpoints(metrics, readiness, settings.metrics_host, port,
                                  port_setting(metrics.role)).start()
    log.info("%s metrics on %s/metrics, health on %s/healthz and %s/readyz", metrics.role,
             endpoints.url, endpoints.url, endpoints.url)
    return endpoints
