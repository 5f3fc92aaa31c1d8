"""The notifier's shared types: what an alert is about (AlertKind, with its words in
KIND_TEXT), the alert as it is delivered (AlertMessage), one delivery of it to one channel
(Delivery), the channel as a sender sees it (ChannelTarget), what one attempt came to
(DeliveryResult), and the random source retries draw their jitter from (RandomSource).

Pure: no I/O, no clock. Whatever reads the outside (the alerts topic, a channel's
configuration, the clock) builds these and passes them in."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol
from uuid import UUID

from cronlog.domain.channel import ChannelKind
from cronlog.domain.notify_rule import AlertKind
from cronlog.notifications.signing import MAX_SECRETS

# A result's error is kept in the delivery's record and shown on the console: a sentence,
# not a receiver's whole answer.
MAX_ERROR_CHARS = 500


class TenantAlert(StrEnum):
    """The tenant-level alerts: about the tenant's use of the deployment rather than one
    job's runs, delivered to the tenant's default channels whatever a job's rule says."""

    QUEUE_UNSERVED = "queue_unserved"
    IN_FLIGHT_LIMIT = "tenant_in_flight_limit"
    MESSAGE_SET_ASIDE = "message_set_aside"
    # A delivery given up, told to the tenant's other default channels.
    DELIVERY_FAILED = "delivery_failed"
    # A test a tenant asked for (TestChannel): it names no job, and is sent once, now.
    CHANNEL_TEST = "channel_test"


# What an alert as delivered is about: a kind a job's rule may want, or a tenant-level one.
AnyKind = AlertKind | TenantAlert


@dataclass(frozen=True)
class KindText:
    """How a kind reads: `event_type` is the webhook body's `type` (stable: receivers route
    on it), `title` a phrase for a Slack line or an e-mail subject, `one` and `many` what
    a digest counts ("1 more failure", "12 more failures")."""

    event_type: str
    title: str
    one: str
    many: str


KIND_TEXT: MappingProxyType[AnyKind, KindText] = MappingProxyType({
    AlertKind.DEAD_LETTERED: KindText("run.dead_lettered", "run dead-lettered",
                                      "dead letter", "dead letters"),
    AlertKind.FAILED: KindText("run.failed", "attempt failed", "failure", "failures"),
    AlertKind.RECOVERED: KindText("run.recovered", "run recovered", "recovery", "recoveries"),
    AlertKind.MISSED: KindText("job.missed", "fire time missed",
                               "missed fire time", "missed fire times"),
    AlertKind.TIMED_OUT: KindText("run.timed_out", "attempt timed out", "timeout", "timeouts"),
    AlertKind.STARTED_LATE: KindText("run.started_late", "run started late",
                                     "late start", "late starts"),
    AlertKind.SET_ASIDE: KindText("job.set_aside", "job set aside", "set-aside", "set-asides"),
    TenantAlert.QUEUE_UNSERVED: KindText("queue.unserved", "queue unserved",
                                         "unserved run", "unserved runs"),
    TenantAlert.IN_FLIGHT_LIMIT: KindText("tenant.in_flight_limit", "in-flight limit reached",
                                          "time at the limit", "times at the limit"),
    TenantAlert.MESSAGE_SET_ASIDE: KindText("message.set_aside", "message set aside",
                                            "message set aside", "messages set aside"),
    TenantAlert.DELIVERY_FAILED: KindText("delivery.failed", "alert delivery failed",
                                          "failed delivery", "failed deliveries"),
    TenantAlert.CHANNEL_TEST: KindText("channel.test", "test alert",
                                       "test alert", "test alerts"),
})


@dataclass(frozen=True)
class AlertMessage:
    """One alert as the notifier delivers it. `digest_count` is 0 for an alert of its own,
    N for a digest that stands for N alerts the throttle held back (rules.Throttle).

    Texts are not bounded here: rendering bounds what it puts on the wire."""

    alert_id: UUID
    tenant: str
    kind: AnyKind
    job_id: UUID
    job_name: str
    run_id: UUID | None
    attempt: int | None
    message: str
    at: datetime
    digest_count: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, (AlertKind, TenantAlert)):
            raise ValueError(f"alert kind: an AlertKind or TenantAlert, not {self.kind!r}")
        if self.at.tzinfo is None:
            raise ValueError("alert at: a time with a zone (UTC), not a naive datetime")
        if self.attempt is not None and self.attempt < 1:
            raise ValueError(f"alert attempt: 1 or more, not {self.attempt}")
        if self.digest_count < 0:
            raise ValueError(f"alert digest_count: 0 or more, not {self.digest_count}")


@dataclass(frozen=True)
class Delivery:
    """One alert to one channel. `delivery_id` is the same on every attempt
    (retry_plan.delivery_id), so a receiver recognises a retry. `attempt` counts from 1;
    `first_at` is when attempt 1 was taken to be sent (None until then), `due_at` when this
    attempt may be sent."""

    delivery_id: UUID
    channel_id: UUID
    alert: AlertMessage
    due_at: datetime
    attempt: int = 1
    first_at: datetime | None = None

    @property
    def tenant(self) -> str:
        return self.alert.tenant


@dataclass(frozen=True)
class ChannelTarget:
    """A channel as a sender needs it, read from the Channel aggregate when a delivery is
    sent: a webhook's or Slack channel's URL (`target`, "" for email), an email channel's
    `recipients` (() otherwise), and for a webhook its signing secrets in `whsec_` form,
    newest first (one per rotation still valid, at most signing.MAX_SECRETS). The secrets
    are kept out of repr: a logged target never shows them."""

    channel_id: UUID
    tenant: str
    kind: ChannelKind
    target: str = ""
    recipients: tuple[str, ...] = ()
    signing_secrets: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ChannelKind):
            raise ValueError(f"channel kind: a ChannelKind, not {self.kind!r}")
        if not isinstance(self.recipients, tuple) \
                or not isinstance(self.signing_secrets, tuple):
            raise ValueError("channel recipients and signing_secrets: tuples")
        if len(self.signing_secrets) > MAX_SECRETS:
            raise ValueError(f"channel signing_secrets: at most {MAX_SECRETS}, "
                             f"not {len(self.signing_secrets)}")


@dataclass(frozen=True)
class DeliveryResult:
    """What one attempt of a delivery came to.

    `ok`: the receiver took it (an HTTP 2xx; the SMTP server accepted the message).
    `status_code`: the HTTP status, or for e-mail the SMTP server's reply code; 0 when no
    answer came (refused by the fence, no connection, a timeout, nothing configured).
    `latency_ms`: from the start of the attempt to its end. `error`: why it failed (when
    ok, what was still refused, such as some of an e-mail's recipients; "" when nothing
    was), one line of at most MAX_ERROR_CHARS. `retryable`: whether trying again later may
    succeed (never for an ok result): a timeout, a refused connection, 408, 429, a 5xx, an
    SMTP 4xx. Everything else (another 4xx, a redirect, an SMTP 5xx, a refused
    destination, a channel that cannot be sent to) fails the delivery at once."""

    ok: bool
    status_code: int
    latency_ms: int
    error: str = ""
    retryable: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.status_code <= 999:
            raise ValueError(f"delivery status_code: 0 to 999, not {self.status_code}")
        if self.latency_ms < 0:
            raise ValueError(f"delivery latency_ms: 0 or more, not {self.latency_ms}")
        if len(self.error) > MAX_ERROR_CHARS or "\n" in self.error:
            raise ValueError(f"delivery error: one line of at most {MAX_ERROR_CHARS} "
                             f"characters, not {len(self.error)}")
        if self.ok and self.retryable:
            raise ValueError("delivery result: an ok result is not retried")


class RandomSource(Protocol):
    """A uniform draw in [0, 1): `random.Random` is one; tests pass a fixed sequence."""

    def random(self) -> float: ...


class AttemptOutcome(StrEnum):
    """Where a delivery stands after an attempt."""

    DELIVERED = "delivered"
    RETRYING = "retrying"  # failed, tried again at next_attempt_at
    FAILED = "failed"  # failed for good: the delivery's own dead letter


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt of a delivery as it is recorded for the tenant to see (the ClickHouse
    table alert_deliveries, `cronlog alerts list`, the console): the delivery (its alert,
    channel and attempt number), the channel's name and kind when it was sent, what the
    attempt came to, when it was sent, and where the delivery stands now."""

    delivery: Delivery
    channel_name: str
    channel_kind: ChannelKind
    result: DeliveryResult
    sent_at: datetime
    outcome: AttemptOutcome
    next_attempt_at: datetime | None = None

    def __post_init__(self) -> None:
        if (self.outcome is AttemptOutcome.RETRYING) != (self.next_attempt_at is not None):
            raise ValueError("attempt record: next_attempt_at with a retrying outcome only")
        if (self.outcome is AttemptOutcome.DELIVERED) != self.result.ok:
            raise ValueError("attempt record: delivered exactly when the result is ok")
