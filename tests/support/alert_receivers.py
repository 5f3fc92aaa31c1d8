"""Real receivers on loopback for the notifier's senders (tests/integration/
test_alert_senders.py): an HTTP server that records each request and answers as the test
says, and an SMTP server (aiosmtpd) that records each message and refuses what it is told
to. Each runs in threads of its own and is stopped when the test ends."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay_seconds: float = 0.0  # before answering (the receiver waits, the client times out)


class HttpReceiver:
    """Answers each POST with answer(request); requests are recorded in order."""

    def __init__(self, answer: Callable[[Request], Reply]) -> None:
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                request = Request(self.path, dict(self.headers.items()), self.rfile.read(length))
                receiver.requests.append(request)
                reply = answer(request)
                if reply.delay_seconds and receiver.stopping.wait(reply.delay_seconds):
                    return
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:
                    pass  # the client gave up (a timeout, a bounded read)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"

    @contextmanager
    def running(self) -> Iterator[HttpReceiver]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stopping.set()
            self._server.shutdown()
            self._server.server_close()
            thread.join(5)


@dataclass(frozen=True)
class Mail:
    mail_from: str
    rcpt_tos: tuple[str, ...]
    content: bytes


class SmtpRecorder:
    """An aiosmtpd handler: refuses the recipients in `rcpt_replies` with their reply,
    answers DATA with `data_reply`, records each message taken."""

    def __init__(self) -> None:
        self.mails: list[Mail] = []
        self.rcpt_replies: dict[str, str] = {}
        self.data_reply = "250 2.0.0 taken"
        self.logins: list[bytes] = []

    async def handle_RCPT(self, server: SMTP, session: Session, envelope: Envelope,
                          address: str, rcpt_options: list[str]) -> str:
        reply = self.rcpt_replies.get(address)
        if reply is not None:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.data_reply.startswith("250"):
            content = envelope.content
            assert isinstance(content, bytes)
            self.mails.append(Mail(str(envelope.mail_from), tuple(envelope.rcpt_tos), content))
        return self.data_reply

    def authenticate(self, server: SMTP, session: Session, envelope: Envelope,
                     mechanism: str, auth_data: Any) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and \
            (auth_data.login, auth_data.password) == (b"cronlog", b"s3cret")
        if ok:
            self.logins.append(auth_data.login)
        return AuthResult(success=ok, handled=False)  # aiosmtpd answers 535 itself


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def smtp_server(recorder: SmtpRecorder, tls: ssl.SSLContext | None = None,
                port: int = 0) -> Iterator[int]:
    """An SMTP server on 127.0.0.1 (STARTTLS and AUTH, with the password `s3cret`, when a
    TLS context is given), on `port` or a free one; yields its port."""
    options: dict[str, Any] = {}
    if tls is not None:
        options = {"tls_context": tls, "authenticator": recorder.authenticate,
                   "auth_require_tls": True}
    controller = Controller(recorder, hostname="127.0.0.1", port=port or free_port(),
                            server_hostname="receiver.test",
                            **options)
    controller.start()
    try:
        yield controller.port
    finally:
        controller.stop()
