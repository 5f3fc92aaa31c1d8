"""What the notifier's senders decide before any connection (infra/notifier/): an attempt
they must not make fails at once, not retried; the e-mail of a delivery is the same on
every attempt; a sender that raises fails only its attempt. The exchanges themselves are
tested against real receivers in tests/integration/test_alert_senders.py."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from cronlog.domain.channel import ChannelKind
from cronlog.infra.config import Settings
from cronlog.infra.notifier.email_sender import EmailSender, SmtpServer, alert_email
from cronlog.infra.notifier.http_delivery import HttpDelivery, redirect_host
from cronlog.infra.notifier.senders import ChannelSenders, alert_senders
from cronlog.infra.notifier.slack_sender import SlackSender
from cronlog.infra.notifier.webhook_sender import WebhookSender, unix_seconds, webhook_id
from cronlog.notifications.model import ChannelTarget, Delivery, DeliveryResult
from cronlog.notifications.ports import AlertSender
from cronlog.notifications.signing import MSG_ID_PATTERN, secret_from_bytes
from cronlog.outbound.policy import OutboundPolicy
from tests.support.notifications import T0, alert, channel, delivery

SECRET = secret_from_bytes(b"s" * 32)
SERVER = SmtpServer("smtp.example.com", 25, "cronlog <alerts@example.com>")
# Nothing listens there, and the fence refuses it anyway: no test here connects.
URL = "https://127.0.0.1:9/hook"


def webhook(**changes: object) -> ChannelTarget:
    fields: dict[str, object] = {"channel_id": channel("acme", 0), "tenant": "acme",
                                 "kind": ChannelKind.WEBHOOK, "target": URL,
                                 "signing_secrets": (SECRET,)}
    fields.update(changes)
    return ChannelTarget(**fields)  # type: ignore[arg-type]


def test_the_webhook_id_is_the_delivery_id_and_fits_the_signatures_pattern() -> None:
    d = delivery()
    assert webhook_id(d.delivery_id) == str(d.delivery_id)
    assert MSG_ID_PATTERN.fullmatch(webhook_id(d.delivery_id))
    assert unix_seconds(T0) == int(T0.timestamp())
    with pytest.raises(ValueError, match="naive"):
        unix_seconds(datetime(2026, 1, 1))


@pytest.mark.parametrize(("channel_target", "now", "error"), [
    (webhook(signing_secrets=()), T0, "the webhook channel has no signing secret"),
    (webhook(signing_secrets=("whsec_short",)), T0, "cannot sign the delivery: webhook secret"),
    (webhook(), datetime(2026, 1, 1), "cannot sign the delivery: now: a time with a zone"),
    (webhook(tenant="globex"), T0, "not for the channel's tenant"),
    (webhook(kind=ChannelKind.SLACK), T0, "a webhook sender cannot send to a slack channel"),
])
def test_a_webhook_that_cannot_be_sent_fails_at_once(channel_target: ChannelTarget,
                                                     now: datetime, error: str) -> None:
    sender = WebhookSender(HttpDelivery(_no_policy()))
    result = sender.send(delivery(), channel_target, now)
    assert (result.ok, result.retryable, result.status_code, result.latency_ms) == \
        (False, False, 0, 0)
    assert error in result.error
    assert "whsec_short" not in result.error


def test_a_url_the_fence_refuses_is_not_retried_and_names_no_path() -> None:
    slack = webhook(kind=ChannelKind.SLACK, target="https://127.0.0.1/services/T0/B0/token")
    result = SlackSender(HttpDelivery(_no_policy())).send(delivery(), slack, T0)
    assert (result.ok, result.retryable) == (False, False)
    assert "not allowed: loopback" in result.error and "token" not in result.error
    bad = SlackSender(HttpDelivery(_no_policy())).send(
        delivery(), webhook(kind=ChannelKind.SLACK, target="ftp://h.example/x"), T0)
    assert "cannot be used" in bad.error and not bad.retryable


def test_a_redirects_host_is_read_from_its_location() -> None:
    assert redirect_host("http://169.254.169.254/latest") == "169.254.169.254"
    assert redirect_host("https://[::1]:8443/x") == "::1"
    assert redirect_host("/elsewhere") == "" and redirect_host("http://[bad") == ""


def test_every_attempt_of_a_delivery_is_the_same_email_but_for_its_date() -> None:
    d = delivery()
    first = alert_email(d, ("ops@example.com",), SERVER, T0)
    again = alert_email(dataclasses.replace(d, attempt=2), ("ops@example.com",), SERVER,
                        datetime(2026, 12, 6, 15, 0, tzinfo=UTC))
    assert first["Message-ID"] == again["Message-ID"] == \
        f"<{d.delivery_id}.cronlog@example.com>"
    assert first["X-Cronlog-Delivery-Id"] == str(d.delivery_id)
    assert first["Date"] != again["Date"]
    assert first.get_content() == again.get_content()


def test_an_alert_cannot_add_a_header_to_its_email() -> None:
    sneaky = alert(job_name="nightly\r\nBcc: everyone@example.com")
    d = Delivery(delivery().delivery_id, channel("acme", 0), sneaky, T0)
    message = alert_email(d, ("ops@example.com",), SERVER, T0)
    assert message["Bcc"] is None
    assert b"\nBcc:" not in message.as_bytes()


def test_an_email_channel_without_a_server_or_recipients_fails_at_once() -> None:
    to = webhook(kind=ChannelKind.EMAIL, target="", recipients=("ops@example.com",),
                 signing_secrets=())
    off = EmailSender(None).send(delivery(), to, T0)
    assert (off.ok, off.retryable, off.error) == \
        (False, False, "no SMTP server configured (CRONLOG_SMTP_HOST)")
    sender = EmailSender(SERVER, local_hostname="cronlog.test")
    nobody = sender.send(delivery(), dataclasses.replace(to, recipients=()), T0)
    assert (nobody.retryable, nobody.error) == (False, "the e-mail channel has no recipients")
    naive = sender.send(delivery(), to, datetime(2026, 1, 1))
    assert not naive.retryable and "naive" in naive.error
    assert "s3cret" not in repr(dataclasses.replace(SERVER, password="s3cret"))


class Raising:
    def send(self, delivery: Delivery, channel: ChannelTarget, now: datetime) -> DeliveryResult:
        raise RuntimeError("a bug")


def test_a_sender_that_raises_fails_only_that_attempt() -> None:
    raising: AlertSender = Raising()
    senders = ChannelSenders({ChannelKind.WEBHOOK: raising})
    result = senders.send(delivery(), webhook(), T0)
    assert (result.ok, result.retryable, result.error) == \
        (False, False, "the webhook sender failed: RuntimeError")
    missing = senders.send(delivery(), webhook(kind=ChannelKind.SLACK), T0)
    assert missing.error == "no sender for slack channels"


def test_the_senders_from_settings_cover_every_kind() -> None:
    senders = alert_senders(Settings())
    for kind in ChannelKind:
        result = senders.send(delivery(), webhook(kind=kind), T0)
        assert "no sender" not in result.error


def _no_policy() -> OutboundPolicy:
    """The fence as it is by default: public addresses only."""
    return OutboundPolicy.of()
