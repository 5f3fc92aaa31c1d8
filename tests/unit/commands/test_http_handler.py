"""The http handler against a real HTTP server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from uuid import uuid4

import pytest

from cronlog.commands.handlers import HandlerContext, HandlerFailed, http

received: list[tuple[str, dict[str, str], bytes]] = []


class Recorder(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        received.append((self.path, dict(self.headers), body))
        status = 500 if self.path == "/broken" else 200
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"done")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def context(payload: dict[str, object]) -> HandlerContext:
    return HandlerContext(run_id=uuid4(), job_id=uuid4(), attempt=2, idempotency_key="run-key",
                          payload=json.dumps(payload).encode(),
                          scheduled_at=datetime(2026, 1, 1, tzinfo=UTC), timeout_seconds=5)


def test_posts_the_body_with_the_idempotency_key(server: str) -> None:
    received.clear()
    assert http(context({"url": f"{server}/hook", "body": {"a": 1}})) == b"done"
    path, headers, body = received[0]
    assert path == "/hook" and json.loads(body) == {"a": 1}
    assert headers["Idempotency-Key"] == "run-key"
    assert headers["X-Cronlog-Attempt"] == "2"


def test_http_errors_fail_the_attempt(server: str) -> None:
    with pytest.raises(HandlerFailed, match="HTTP 500"):
        http(context({"url": f"{server}/broken"}))
    with pytest.raises(HandlerFailed, match="url"):
        http(context({"url": "ftp://nope"}))
