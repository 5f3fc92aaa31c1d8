"""ChannelTester (TestChannel, issue 37): the channel is looked up in the caller's tenant
only (another tenant's or a deleted channel is as missing as none, and nothing is sent);
bad input names its field and sends nothing; a webhook is signed with the secret derived
from the operator's key and the channel's current rotation, and without a key the test is
FAILED_PRECONDITION naming the setting; the test alert is sent once, with a fresh id, and
reads as a test on every kind of channel."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import count
from uuid import UUID

import pytest
from standardwebhooks.webhooks import Webhook

from cronlog.commands.api.channel_api import ChannelApi, SigningKeyMissing
from cronlog.commands.api.channel_testing import NO_JOB, ChannelTester, channel_target
from cronlog.commands.api.ports import ChannelView
from cronlog.domain.channel import ChannelKind, ChannelNotFound, channel_id
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.notifier.webhook_sender import WebhookSender
from cronlog.notifications.model import (
    ChannelTarget,
    Delivery,
    DeliveryResult,
    TenantAlert,
)
from cronlog.notifications.rendering import email_message, slack_payload, webhook_body
from cronlog.notifications.retry_plan import delivery_id
from cronlog.notifications.signing import derive_channel_secret
from tests.support.api_ports import NOW, RecordingBus
from tests.support.clock import FakeClock

KEY = bytes(range(32))
HOOK = "http://127.0.0.1:9/hook"
TAKEN = DeliveryResult(ok=True, status_code=204, latency_ms=12)


def row(tenant: str, name: str, kind: str = "webhook", rotation: int = 0,
        deleted: bool = False) -> ChannelView:
    email = kind == ChannelKind.EMAIL
    return ChannelView(tenant=tenant, name=name, channel_id=channel_id(tenant, name),
                       kind=kind, target="" if email else HOOK,
                       recipients=("ops@example.com",) if email else (), description="",
                       is_default=False, secret_rotation=rotation, version=1 + rotation,
                       deleted=deleted, created_at=NOW, updated_at=NOW)


@dataclass
class Channels:
    rows: dict[tuple[str, str], ChannelView] = field(default_factory=dict)

    def add(self, view: ChannelView) -> None:
        self.rows[(view.tenant, view.name)] = view

    def channel(self, tenant: str, name: str) -> ChannelView | None:
        return self.rows.get((tenant, name))

    def channels(self, tenant: str, page_size: int,
                 page_token: str | None) -> tuple[list[ChannelView], str | None]:
        raise AssertionError("a test reads one channel")

    def count_channels(self, tenant: str) -> int:
        raise AssertionError("a test reads one channel")


@dataclass
class Sender:
    """An AlertSender that records each attempt and answers `result`."""

    result: DeliveryResult = TAKEN
    sent: list[tuple[Delivery, ChannelTarget, datetime]] = field(default_factory=list)

    def send(self, delivery: Delivery, channel: ChannelTarget, now: datetime) -> DeliveryResult:
        self.sent.append((delivery, channel, now))
        return self.result


def ids() -> UUID:
    return UUID(int=next(_ids))


_ids = count(1)


def make_tester(channels: Channels, sender: Sender, key: bytes = KEY) -> ChannelTester:
    clock = FakeClock(at=NOW)
    return ChannelTester(ChannelApi(bus=RecordingBus(), channels=channels, clock=clock,
                                    signing_key=key), sender, clock, new_id=ids)


def test_a_webhook_test_is_one_signed_attempt_of_a_fresh_alert() -> None:
    channels, sender = Channels(), Sender()
    channels.add(row("acme", "ops", rotation=2))
    first = make_tester(channels, sender).test("acme", "ops")
    assert first.result == TAKEN
    delivery, target, at = sender.sent[0]
    assert at == NOW and delivery.attempt == 1 and delivery.due_at == NOW
    assert first.delivery_id == delivery.delivery_id == delivery_id(
        delivery.alert.alert_id, channel_id("acme", "ops"))
    assert (target.channel_id, target.tenant, target.kind, target.target) == (
        channel_id("acme", "ops"), "acme", ChannelKind.WEBHOOK, HOOK)
    # The current rotation's secret alone: a rotation stops the previous one verifying.
    assert target.signing_secrets == (derive_channel_secret(KEY, channel_id("acme", "ops"), 2),)
    alert = delivery.alert
    assert (alert.kind, alert.tenant, alert.job_id, alert.job_name, alert.run_id,
            alert.attempt, alert.digest_count, alert.at) == (
        TenantAlert.CHANNEL_TEST, "acme", NO_JOB, "ops", None, None, 0, NOW)
    assert alert.message == "a test alert from cronlog for channel ops"
    second = make_tester(channels, sender).test("acme", "ops")
    assert second.delivery_id != first.delivery_id, "each test is an alert of its own"
    assert len(sender.sent) == 2, "one attempt per test, never retried"


def test_a_failed_attempt_is_answered_as_it_came_and_not_retried() -> None:
    channels = Channels()
    channels.add(row("acme", "ops"))
    refused = DeliveryResult(ok=False, status_code=500, latency_ms=3, error="HTTP 500",
                             retryable=True)
    sender = Sender(result=refused)
    assert make_tester(channels, sender).test("acme", "ops").result == refused
    assert len(sender.sent) == 1


@pytest.mark.parametrize("seen", ["other tenant", "deleted", "missing"])
def test_a_channel_not_the_callers_is_not_found_and_nothing_is_sent(seen: str) -> None:
    channels, sender = Channels(), Sender()
    channels.add(row("beta", "ops"))
    if seen == "deleted":
        channels.add(row("acme", "ops", deleted=True))
    name = "nope" if seen == "missing" else "ops"
    with pytest.raises(ChannelNotFound) as missing:
        make_tester(channels, sender).test("acme", name)
    assert str(missing.value) == f"channel {name!r} not found"
    assert sender.sent == []


@pytest.mark.parametrize(("tenant", "name", "named"), [
    ("", "ops", "tenant"), ("acme", "", "name"), ("acme", "no spaces", "name"),
    ("acme", "x" * 129, "name")])
def test_bad_input_names_its_field_and_sends_nothing(tenant: str, name: str,
                                                     named: str) -> None:
    channels, sender = Channels(), Sender()
    with pytest.raises(InvalidSpec) as refused:
        make_tester(channels, sender).test(tenant, name)
    assert refused.value.field == named
    assert sender.sent == []


def test_a_webhook_without_the_operators_key_is_a_failed_precondition() -> None:
    channels, sender = Channels(), Sender()
    channels.add(row("acme", "ops"))
    channels.add(row("acme", "mail", kind="email"))
    with pytest.raises(SigningKeyMissing) as refused:
        make_tester(channels, sender, key=b"").test("acme", "ops")
    assert refused.value.status == "FAILED_PRECONDITION"
    assert "CRONLOG_ALERT_SIGNING_KEY_FILE" in str(refused.value)
    assert sender.sent == []
    # An e-mail channel signs nothing: it needs no key.
    assert make_tester(channels, sender, key=b"").test("acme", "mail").result == TAKEN
    _, target, _ = sender.sent[0]
    assert (target.kind, target.recipients, target.signing_secrets) == (
        ChannelKind.EMAIL, ("ops@example.com",), ())


def test_the_test_alert_reads_as_a_test_on_every_kind() -> None:
    channels, sender = Channels(), Sender()
    channels.add(row("acme", "ops"))
    make_tester(channels, sender).test("acme", "ops")
    alert = sender.sent[0][0].alert
    body = json.loads(webhook_body(alert))
    assert body["type"] == "channel.test"
    assert body["data"]["kind"] == "channel_test"
    assert body["data"]["message"] == "a test alert from cronlog for channel ops"
    assert "test alert" in slack_payload(alert)["text"]
    assert email_message(alert).subject == "[cronlog] ops: test alert"


@dataclass
class Posts:
    """HttpDelivery's place: records what the webhook sender posts."""

    posted: list[tuple[str, bytes, Mapping[str, str]]] = field(default_factory=list)

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> DeliveryResult:
        self.posted.append((url, body, headers))
        return TAKEN


def test_the_webhook_test_verifies_with_the_published_library() -> None:
    channels, posts = Channels(), Posts()
    view = row("acme", "ops", rotation=1)
    channels.add(view)
    clock = FakeClock(at=datetime.fromtimestamp(int(time.time()), UTC))
    sender = WebhookSender(posts)  # type: ignore[arg-type]
    tested = ChannelTester(ChannelApi(bus=RecordingBus(), channels=channels, clock=clock,
                                      signing_key=KEY), sender, clock).test("acme", "ops")
    url, body, headers = posts.posted[0]
    assert url == HOOK and headers["webhook-id"] == str(tested.delivery_id)
    secret = derive_channel_secret(KEY, view.channel_id, 1)
    assert Webhook(secret).verify(body, dict(headers))["type"] == "channel.test"
    assert channel_target(dataclasses.replace(view, kind="slack"), "").signing_secrets == ()
