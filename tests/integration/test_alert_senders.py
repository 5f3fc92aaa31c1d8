"""The notifier's senders against real receivers on loopback (infra/notifier/): a webhook
receiver that verifies the Standard Webhooks signature with the published library and
answers 500 to the first delivery, a Slack-like receiver, an SMTP server (aiosmtpd); the
egress fence, the timeout and redirects. No Kafka, Postgres or ClickHouse: every receiver
is started here."""

from __future__ import annotations

import dataclasses
import email
import email.policy
import json
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cronlog.domain.channel import ChannelKind
from cronlog.infra.config import Settings
from cronlog.infra.notifier.email_sender import EmailSender, SmtpServer
from cronlog.infra.notifier.http_delivery import MAX_ANSWER_BYTES, HttpDelivery
from cronlog.infra.notifier.senders import alert_senders
from cronlog.infra.notifier.slack_sender import SlackSender
from cronlog.infra.notifier.webhook_sender import WebhookSender
from cronlog.notifications.model import ChannelTarget, Delivery
from cronlog.notifications.signing import secret_from_bytes
from cronlog.outbound.policy import OutboundPolicy
from tests.support.alert_receivers import (
    HttpReceiver,
    Reply,
    Request,
    SmtpRecorder,
    smtp_server,
)
from tests.support.notifications import channel, delivery

pytestmark = pytest.mark.integration

NEW_SECRET = secret_from_bytes(b"n" * 32)
OLD_SECRET = secret_from_bytes(b"o" * 32)
# The receivers are threads of this test process, which make test runs as SCHED_IDLE beside
# other sessions: starved, a 1 s timeout once ran out before the receiver answered. Only
# the timeout's own test keeps 1 s.
LOOPBACK_TIMEOUT = timedelta(seconds=30)
LOOPBACK = Settings(http_allow=("127.0.0.1",), alert_http_timeout=LOOPBACK_TIMEOUT)
QUICK_LOOPBACK = Settings(http_allow=("127.0.0.1",), alert_http_timeout=timedelta(seconds=1))


def target(kind: ChannelKind, url: str = "", recipients: tuple[str, ...] = (),
           secrets: tuple[str, ...] = ()) -> ChannelTarget:
    return ChannelTarget(channel("acme", 0), "acme", kind, url, recipients, secrets)


def now() -> datetime:
    return datetime.now(UTC)  # the receiver's library checks the timestamp against its clock


class SignedReceiver:
    """Verifies every request with one secret; answers 500 to a webhook-id's first request,
    204 after."""

    def __init__(self, secret: str) -> None:
        self.webhook = Webhook(secret)
        self.verified: list[object] = []
        self.seen: set[str] = set()

    def __call__(self, request: Request) -> Reply:
        try:
            self.verified.append(self.webhook.verify(request.body, request.headers))
        except WebhookVerificationError:
            return Reply(401, b"bad signature")
        first = request.headers["webhook-id"] not in self.seen
        self.seen.add(request.headers["webhook-id"])
        return Reply(500, b"try again") if first else Reply(204)


@pytest.fixture
def webhook_receiver() -> Iterator[tuple[HttpReceiver, SignedReceiver]]:
    signed = SignedReceiver(OLD_SECRET)  # rotation under way: the receiver has the old one
    with HttpReceiver(signed).running() as receiver:
        yield receiver, signed


def test_a_signed_webhook_is_retried_with_the_same_id_and_verified_by_the_library(
        webhook_receiver: tuple[HttpReceiver, SignedReceiver]) -> None:
    receiver, signed = webhook_receiver
    sender = alert_senders(LOOPBACK)
    first = delivery("acme", to=0)
    channel_target = target(ChannelKind.WEBHOOK, f"{receiver.url}/hooks/cronlog",
                            secrets=(NEW_SECRET, OLD_SECRET))
    failed = sender.send(first, channel_target, now())
    assert (failed.ok, failed.status_code, failed.retryable) == (False, 500, True)
    assert failed.error == "HTTP 500: try again"
    retry = dataclasses.replace(first, attempt=2, first_at=first.due_at)
    result = sender.send(retry, channel_target, now())
    assert (result.ok, result.status_code, result.error, result.retryable) == \
        (True, 204, "", False)
    assert 0 <= result.latency_ms < LOOPBACK_TIMEOUT.total_seconds() * 1000
    one, two = receiver.requests
    assert one.headers["webhook-id"] == two.headers["webhook-id"] == str(first.delivery_id)
    assert one.body == two.body and one.path == "/hooks/cronlog"
    assert one.headers["Content-Type"] == "application/json"
    assert one.headers["User-Agent"] == "cronlog-notifier"
    assert len(one.headers["webhook-signature"].split(" ")) == 2
    assert len(signed.verified) == 2
    body = signed.verified[0]
    assert isinstance(body, dict) and body["type"] == "run.dead_lettered"
    assert body["data"]["alert_id"] == str(first.alert.alert_id)


def test_a_receiver_without_the_secret_refuses_and_that_is_not_retried() -> None:
    with HttpReceiver(SignedReceiver(secret_from_bytes(b"x" * 32))).running() as receiver:
        result = alert_senders(LOOPBACK).send(
            delivery(), target(ChannelKind.WEBHOOK, receiver.url, secrets=(NEW_SECRET,)), now())
    assert (result.ok, result.status_code, result.retryable) == (False, 401, False)
    assert result.error == "HTTP 401: bad signature"


def test_a_slack_channel_gets_its_payload_and_slacks_errors_are_quoted() -> None:
    answers = iter([Reply(200, b"ok"), Reply(404, b"channel_not_found"),
                    Reply(429, b"rate_limited", (("Retry-After", "30"),))])
    with HttpReceiver(lambda request: next(answers)).running() as receiver:
        sender = SlackSender(HttpDelivery(OutboundPolicy.of(f"127.0.0.1:{receiver.port}")))
        slack = target(ChannelKind.SLACK, f"{receiver.url}/services/T0/B0/secretpart")
        results = [sender.send(delivery(), slack, now()) for _ in range(3)]
    assert [(r.ok, r.status_code, r.retryable) for r in results] == \
        [(True, 200, False), (False, 404, False), (False, 429, True)]
    assert results[1].error == "HTTP 404: channel_not_found"
    request = receiver.requests[0]
    assert request.headers["Content-Type"] == "application/json"
    assert "webhook-signature" not in request.headers
    text = json.loads(request.body)["text"]
    assert text.startswith("*nightly*: run dead-lettered (attempt 3)\n> exit status 1\n")


def test_a_target_the_fence_refuses_fails_not_retried_and_nothing_is_sent(
        webhook_receiver: tuple[HttpReceiver, SignedReceiver]) -> None:
    receiver, _ = webhook_receiver
    hook = target(ChannelKind.WEBHOOK, f"{receiver.url}/hook", secrets=(NEW_SECRET,))
    not_allowed = alert_senders(Settings()).send(delivery(), hook, now())
    assert (not_allowed.ok, not_allowed.retryable, not_allowed.status_code) == (False, False, 0)
    assert not_allowed.error == ("destination 127.0.0.1 is not allowed: loopback; operators "
                                 "can allow it with CRONLOG_HTTP_ALLOW")
    # The receiver's port as the deployment's ClickHouse: loopback allowed, but not that.
    own = Settings(http_allow=("127.0.0.0/8",), clickhouse_port=receiver.port)
    refused = alert_senders(own).send(delivery(), hook, now())
    assert (refused.ok, refused.retryable) == (False, False)
    assert "one of this deployment's own servers" in refused.error
    slack = target(ChannelKind.SLACK, f"http://localhost:{receiver.port}/services/x")
    assert "not allowed: loopback" in alert_senders(Settings()).send(delivery(), slack,
                                                                      now()).error
    assert receiver.requests == []


def test_a_slow_receiver_hits_the_timeout_and_is_retried() -> None:
    with HttpReceiver(lambda request: Reply(204, delay_seconds=5)).running() as receiver:
        started = time.monotonic()
        result = alert_senders(QUICK_LOOPBACK).send(
            delivery(), target(ChannelKind.WEBHOOK, receiver.url, secrets=(NEW_SECRET,)), now())
        took = time.monotonic() - started
    assert (result.ok, result.retryable, result.status_code) == (False, True, 0)
    assert result.error == ("127.0.0.1 did not connect and answer within 1 s each "
                            "(CRONLOG_ALERT_HTTP_TIMEOUT_MS)")
    # Cut at the 1 s timeout, not after the receiver's 5 s: the upper bound leaves a starved
    # machine room.
    assert 0.9 <= took < 4.5 and 900 <= result.latency_ms < 4500


def test_a_redirect_is_not_followed_and_names_where_it_points() -> None:
    redirect = Reply(302, headers=(("Location", "http://169.254.169.254/latest/meta-data/"),))
    with HttpReceiver(lambda request: redirect).running() as receiver:
        result = alert_senders(LOOPBACK).send(
            delivery(), target(ChannelKind.WEBHOOK, receiver.url, secrets=(NEW_SECRET,)), now())
    assert (result.ok, result.retryable, result.status_code) == (False, False, 302)
    assert "Location points to 169.254.169.254" in result.error
    assert len(receiver.requests) == 1


def test_a_huge_answer_is_read_only_up_to_its_bound() -> None:
    huge = Reply(503, b"e" * (1024 * 1024))
    with HttpReceiver(lambda request: huge).running() as receiver:
        result = alert_senders(LOOPBACK).send(
            delivery(), target(ChannelKind.WEBHOOK, receiver.url, secrets=(NEW_SECRET,)), now())
    assert (result.status_code, result.retryable) == (503, True)
    assert len(result.error) <= 220 and MAX_ANSWER_BYTES == 4096


def test_nothing_answering_is_retried() -> None:
    with HttpReceiver(lambda request: Reply(204)).running() as receiver:
        url = receiver.url
    result = alert_senders(LOOPBACK).send(
        delivery(), target(ChannelKind.WEBHOOK, url, secrets=(NEW_SECRET,)), now())
    assert (result.ok, result.retryable, result.status_code) == (False, True, 0)
    assert "POST to 127.0.0.1 failed" in result.error


# E-mail

SERVER = SmtpServer("127.0.0.1", 0, "cronlog <alerts@example.com>")


# Generous: the recording server is a thread of this test process, which `make test` runs
# beside other sessions as SCHED_IDLE; a 5 s timeout once ran out while it was starved.
SMTP_TIMEOUT_S = 30


def email_sender(port: int, **changes: object) -> EmailSender:
    server = dataclasses.replace(SERVER, port=port, **changes)  # type: ignore[arg-type]
    return EmailSender(server, timeout_seconds=SMTP_TIMEOUT_S, local_hostname="cronlog.test")


def mail_target(*recipients: str) -> ChannelTarget:
    return target(ChannelKind.EMAIL, recipients=recipients)


def test_an_email_reaches_the_smtp_server_and_a_retry_has_the_same_message_id() -> None:
    recorder = SmtpRecorder()
    first = delivery()
    with smtp_server(recorder) as port:
        sender = email_sender(port)
        to = mail_target("ops@example.com", "oncall@example.org")
        results = [sender.send(first, to, now()),
                   sender.send(dataclasses.replace(first, attempt=2), to, now())]
    assert [(r.ok, r.status_code, r.error) for r in results] == [(True, 250, "")] * 2
    one, two = (email.message_from_bytes(m.content, policy=email.policy.default)
                for m in recorder.mails)
    assert recorder.mails[0].mail_from == "alerts@example.com"
    assert recorder.mails[0].rcpt_tos == ("ops@example.com", "oncall@example.org")
    assert one["Message-ID"] == two["Message-ID"] == \
        f"<{first.delivery_id}.cronlog@example.com>"
    assert one["X-Cronlog-Delivery-Id"] == str(first.delivery_id)
    assert one["Subject"] == "[cronlog] nightly: run dead-lettered (attempt 3)"
    assert one["From"] == "cronlog <alerts@example.com>"
    assert one["Auto-Submitted"] == "auto-generated"
    assert "exit status 1" in one.get_content()


@pytest.mark.parametrize(("recipients", "status", "retryable"), [
    (("busy@example.com",), 450, True), (("gone@example.com",), 550, False)])
def test_smtp_4xx_is_retried_and_5xx_is_not(recipients: tuple[str, ...], status: int,
                                            retryable: bool) -> None:
    recorder = SmtpRecorder()
    recorder.rcpt_replies = {"busy@example.com": "450 4.2.1 mailbox busy",
                             "gone@example.com": "550 5.1.1 no such user"}
    with smtp_server(recorder) as port:
        result = email_sender(port).send(delivery(), mail_target(*recipients), now())
        recorder.data_reply = "451 4.3.0 try later"
        later = email_sender(port).send(delivery(), mail_target("ops@example.com"), now())
        recorder.data_reply = "554 5.7.1 refused as spam"
        spam = email_sender(port).send(delivery(), mail_target("ops@example.com"), now())
    assert (result.ok, result.status_code, result.retryable) == (False, status, retryable)
    assert recipients[0] in result.error
    assert (later.ok, later.status_code, later.retryable) == (False, 451, True)
    assert (spam.ok, spam.status_code, spam.retryable) == (False, 554, False)
    assert spam.error == "SMTP 554: 5.7.1 refused as spam"
    assert recorder.mails == []


def test_a_message_taken_for_some_recipients_is_delivered_naming_the_others() -> None:
    recorder = SmtpRecorder()
    recorder.rcpt_replies = {"gone@example.com": "550 5.1.1 no such user"}
    with smtp_server(recorder) as port:
        result = email_sender(port).send(
            delivery(), mail_target("ops@example.com", "gone@example.com"), now())
    assert (result.ok, result.status_code, result.retryable) == (True, 250, False)
    assert result.error == "refused for gone@example.com (550 5.1.1 no such user)"
    assert [m.rcpt_tos for m in recorder.mails] == [("ops@example.com",)]


def test_without_an_smtp_server_an_email_channel_fails_clearly() -> None:
    result = alert_senders(Settings()).send(delivery(), mail_target("ops@example.com"), now())
    assert (result.ok, result.retryable, result.status_code, result.error) == \
        (False, False, 0, "no SMTP server configured (CRONLOG_SMTP_HOST)")


def test_no_smtp_server_listening_is_retried() -> None:
    with smtp_server(SmtpRecorder()) as port:
        pass
    result = email_sender(port).send(delivery(), mail_target("ops@example.com"), now())
    assert (result.ok, result.retryable, result.status_code) == (False, True, 0)
    assert result.error.startswith(f"SMTP server 127.0.0.1:{port}: ")


def test_starttls_asked_of_a_server_without_it_is_not_retried() -> None:
    with smtp_server(SmtpRecorder()) as port:
        result = email_sender(port, starttls=True).send(
            delivery(), mail_target("ops@example.com"), now())
    assert (result.ok, result.retryable) == (False, False)
    assert "STARTTLS extension not supported" in result.error


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def test_starttls_then_the_login_with_the_certificate_checked(
        certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    recorder = SmtpRecorder()
    with smtp_server(recorder, server_tls) as port:
        trusting = EmailSender(dataclasses.replace(
            SERVER, port=port, starttls=True, username="cronlog", password="s3cret"),
            timeout_seconds=SMTP_TIMEOUT_S, tls=ssl.create_default_context(cafile=str(cert)),
            local_hostname="cronlog.test")
        ok = trusting.send(delivery(), mail_target("ops@example.com"), now())
        wrong = EmailSender(dataclasses.replace(
            SERVER, port=port, starttls=True, username="cronlog", password="wrong"),
            timeout_seconds=SMTP_TIMEOUT_S, tls=ssl.create_default_context(cafile=str(cert)),
            local_hostname="cronlog.test").send(delivery(), mail_target("ops@example.com"),
                                                now())
        untrusted = email_sender(port, starttls=True).send(
            delivery(), mail_target("ops@example.com"), now())
    assert (ok.ok, ok.status_code) == (True, 250)
    assert recorder.logins == [b"cronlog"] and len(recorder.mails) == 1
    assert (wrong.ok, wrong.status_code, wrong.retryable) == (False, 535, False), wrong
    assert (untrusted.ok, untrusted.retryable) == (False, True)
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.error


def test_a_delivery_for_another_tenants_channel_is_never_sent(
        webhook_receiver: tuple[HttpReceiver, SignedReceiver]) -> None:
    receiver, _ = webhook_receiver
    theirs = ChannelTarget(channel("acme", 0), "globex", ChannelKind.WEBHOOK, receiver.url,
                           signing_secrets=(NEW_SECRET,))
    mine: Delivery = delivery("acme", to=0)
    result = WebhookSender(HttpDelivery(OutboundPolicy.of("127.0.0.1"))).send(mine, theirs,
                                                                              now())
    assert (result.ok, result.retryable) == (False, False)
    assert receiver.requests == []
