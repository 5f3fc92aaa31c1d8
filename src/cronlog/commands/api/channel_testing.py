"""TestChannel (issue 37, docs/alerts.md "Testing a channel"): a tenant sends one test alert
to one of its channels, now, and is told what the attempt came to.

The channel is looked up the way GetChannel looks it up, in the caller's tenant only, so
another tenant's channel and a deleted one are NOT_FOUND worded like one never created
(invariant 10). It is sent as the notifier will send a real alert: the same ChannelTarget
(a webhook signed with the secret derived from the operator's key and the channel's current
rotation), the same sender of the channel's kind, through the same egress fence. Unlike
the notifier's, the attempt is made once and never retried: the tenant is waiting for its
answer, and a retry would be a second test alert the tenant did not ask for.

Cost (invariant 12): one channel row read, one HMAC, one send. The send is bounded by the
sender's own timeouts (HTTP: connecting, then the answer, each within
CRONLOG_ALERT_HTTP_TIMEOUT_MS; e-mail: 30 s for the whole exchange), and how many a tenant
may run at once and per minute is the api's tenant budget (infra/grpc/tenant_budget.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID, uuid4

from cronlog.commands.api.ports import ChannelView
from cronlog.domain.channel import ChannelKind
from cronlog.notifications.model import AlertMessage, ChannelTarget, DeliveryResult, TenantAlert
from cronlog.notifications.ports import AlertSender
from cronlog.notifications.retry_plan import first_delivery
from cronlog.ports import Clock

# A test alert is about no job: the nil UUID in the job's place, the channel's name in the
# job name's (what an e-mail's subject and a Slack line lead with).
NO_JOB = UUID(int=0)


class ChannelLookup(Protocol):
    """The channel reads the test needs (ChannelApi is one)."""

    def get(self, tenant: str, name: str) -> ChannelView:
        """The tenant's live channel of that name; InvalidSpec naming `tenant` or `name` for
        bad input, ChannelNotFound for a missing, deleted or another tenant's channel."""

    def secret_of(self, channel: ChannelView) -> str:
        """A webhook channel's current signing secret ("" for the other kinds);
        SigningKeyMissing (FAILED_PRECONDITION) when the deployment has no key."""


@dataclass(frozen=True)
class ChannelTestResult:
    """What the test came to: the delivery's id (a webhook's `webhook-id`; in an e-mail the
    `X-Cronlog-Delivery-Id` header and the start of its Message-ID) and the attempt's
    result, as the sender gave it."""

    delivery_id: UUID
    result: DeliveryResult


def channel_test_message(name: str) -> str:
    return f"a test alert from cronlog for channel {name}"


def channel_test_alert(channel: ChannelView, alert_id: UUID, at: datetime) -> AlertMessage:
    """The test alert for a channel: kind channel_test (`channel.test`), no job, no run."""
    return AlertMessage(alert_id=alert_id, tenant=channel.tenant,
                        kind=TenantAlert.CHANNEL_TEST, job_id=NO_JOB, job_name=channel.name,
                        run_id=None, attempt=None,
                        message=channel_test_message(channel.name), at=at)


def channel_target(channel: ChannelView, secret: str) -> ChannelTarget:
    """The channel as a sender sees it. A webhook signs with its current secret alone: a
    rotation stops the previous one from verifying (docs/alerts.md, "Channels")."""
    return ChannelTarget(channel_id=channel.channel_id, tenant=channel.tenant,
                         kind=ChannelKind(channel.kind), target=channel.target,
                         recipients=tuple(channel.recipients),
                         signing_secrets=(secret,) if secret else ())


@dataclass
class ChannelTester:
    channels: ChannelLookup
    sender: AlertSender
    clock: Clock
    new_id: Callable[[], UUID] = uuid4

    def test(self, tenant: str, name: str) -> ChannelTestResult:
        """Sends the test alert once; raises (and sends nothing) for bad input, a channel
        the tenant has not, or a webhook channel without the operator's key."""
        channel = self.channels.get(tenant, name)
        target = channel_target(channel, self.channels.secret_of(channel))
        now = self.clock.now()
        delivery = first_delivery(channel_test_alert(channel, self.new_id(), now),
                                  channel.channel_id, now)
        return ChannelTestResult(delivery.delivery_id, self.sender.send(delivery, target, now))
