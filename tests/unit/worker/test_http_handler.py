"""The http handler against a real HTTP server on loopback: fenced by its outbound policy,
bounded in what it reads and how long it takes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from uuid import uuid4

import pytest

from cronlog.outbound.policy import OutboundPolicy
from cronlog.worker.built_in_handlers import http
from cronlog.worker.execution import MAX_OUTPUT_BYTES, bound_output
from cronlog.worker.handler_context import HandlerContext, HandlerFailed
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.http_handler import MAX_RESPONSE_BYTES, HttpHandler

received: list[tuple[str, dict[str, str], bytes]] = []


class Recorder(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        received.append((self.path, dict(self.headers), body))
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.end_headers()
            return
        if self.path == "/huge":
            self.send_response(200)
            self.end_headers()
            chunk = b"x" * 65536
            try:
                for _ in range(10 * 1024):  # 640 MiB, far more than the handler reads
                    self.wfile.write(chunk)
            except OSError:
                pass
            return
        if self.path == "/drip":
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
            return
        status = 500 if self.path == "/broken" else 200
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"done")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    received.clear()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def context(payload: dict[str, object], timeout: float = 5) -> HandlerContext:
    return HandlerContext(run_id=uuid4(), job_id=uuid4(), attempt=2, idempotency_key="run-key",
                          payload=json.dumps(payload).encode(),
                          scheduled_at=datetime(2026, 1, 1, tzinfo=UTC), timeout_seconds=timeout)


def port_of(server: str) -> int:
    return int(server.rsplit(":", 1)[1])


@pytest.fixture
def allowed(server: str) -> HttpHandler:
    return HttpHandler(OutboundPolicy.of(f"127.0.0.1:{port_of(server)}"))


def test_loopback_is_refused_by_default_and_nothing_is_sent(server: str) -> None:
    for url in (f"{server}/hook", f"http://localhost:{port_of(server)}/hook",
                f"http://[::ffff:127.0.0.1]:{port_of(server)}/hook",
                f"http://2130706433:{port_of(server)}/hook"):  # 127.0.0.1 as one number
        with pytest.raises(HandlerFailed) as caught:
            http(context({"url": url}))
        assert caught.value.error_type == "DestinationRefused"
        assert "is not allowed: loopback; operators can allow it with CRONLOG_HTTP_ALLOW" \
            in str(caught.value)
    assert received == []


def test_the_registry_uses_the_policy_it_is_given(server: str) -> None:
    registry = HandlerRegistry(outbound=OutboundPolicy.of("127.0.0.0/8"))
    assert registry.get("http")(context({"url": f"{server}/hook"})) == b"done"
    with pytest.raises(HandlerFailed, match="not allowed: loopback"):
        HandlerRegistry().get("http")(context({"url": f"{server}/hook"}))


def test_own_servers_stay_refused_under_a_broad_allow_list(server: str) -> None:
    handler = HttpHandler(OutboundPolicy.of("127.0.0.1", [("127.0.0.1", port_of(server))]))
    with pytest.raises(HandlerFailed, match="own servers"):
        handler(context({"url": f"{server}/hook"}))
    assert received == []


def test_posts_the_body_with_the_idempotency_key_when_allowed(server: str,
                                                             allowed: HttpHandler) -> None:
    assert allowed(context({"url": f"{server}/hook?q=1", "body": {"a": 1},
                            "headers": {"X-Extra": "yes"}})) == b"done"
    path, headers, body = received[0]
    assert path == "/hook?q=1" and json.loads(body) == {"a": 1}
    assert headers["Idempotency-Key"] == "run-key"
    assert headers["X-Cronlog-Attempt"] == "2"
    assert headers["X-Extra"] == "yes"
    assert headers["Host"] == f"127.0.0.1:{port_of(server)}"


def test_the_host_header_keeps_the_name_in_the_url(server: str) -> None:
    handler = HttpHandler(OutboundPolicy.of("localhost"))
    assert handler(context({"url": f"http://localhost:{port_of(server)}/named"})) == b"done"
    assert received[0][1]["Host"] == f"localhost:{port_of(server)}"


def test_http_errors_and_bad_urls_fail_the_attempt(server: str, allowed: HttpHandler) -> None:
    with pytest.raises(HandlerFailed, match="HTTP 500"):
        allowed(context({"url": f"{server}/broken"}))
    for url in ("ftp://nope", "file:///etc/passwd", 42):
        with pytest.raises(HandlerFailed, match="url") as caught:
            allowed(context({"url": url}))
        assert caught.value.error_type == "PayloadError"


def test_redirects_are_reported_not_followed(server: str, allowed: HttpHandler) -> None:
    with pytest.raises(HandlerFailed) as caught:
        allowed(context({"url": f"{server}/redirect"}))
    assert caught.value.error_type == "HttpRedirect"
    assert "redirects are not followed" in str(caught.value)
    assert "169.254.169.254" in str(caught.value)
    assert [path for path, _, _ in received] == ["/redirect"]


def test_a_huge_response_is_read_only_up_to_the_bound(server: str, allowed: HttpHandler) -> None:
    started = time.monotonic()
    output = allowed(context({"url": f"{server}/huge"}))
    assert len(output) == MAX_RESPONSE_BYTES + 1
    assert bound_output(output) == (b"x" * MAX_OUTPUT_BYTES, True)
    assert time.monotonic() - started < 3


def test_a_slow_response_ends_at_the_attempts_timeout(server: str, allowed: HttpHandler) -> None:
    started = time.monotonic()
    with pytest.raises(HandlerFailed, match="timeout") as caught:
        allowed(context({"url": f"{server}/drip"}, timeout=1))
    assert caught.value.error_type == "HttpError"
    assert time.monotonic() - started < 2.5


def test_https_speaks_tls_to_the_checked_address(server: str, allowed: HttpHandler) -> None:
    # The receiver speaks plain HTTP: the handshake fails, so TLS was attempted there.
    with pytest.raises(HandlerFailed) as caught:
        allowed(context({"url": server.replace("http://", "https://") + "/hook"}))
    assert caught.value.error_type == "HttpError"
    assert "SSL" in str(caught.value) or "TLS" in str(caught.value)


def test_a_header_that_cannot_be_sent_is_a_payload_error(server: str,
                                                         allowed: HttpHandler) -> None:
    with pytest.raises(HandlerFailed) as caught:
        allowed(context({"url": f"{server}/hook", "headers": {"X-Evil": "a\r\nHost: b"}}))
    assert caught.value.error_type == "PayloadError"
    assert received == []
