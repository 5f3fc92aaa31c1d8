"""What the notifier needs from the outside to deliver: a sender per kind of channel
(infra/notifier/ implements them: webhook, Slack, e-mail)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from cronlog.notifications.model import (
    AttemptOutcome,
    AttemptRecord,
    ChannelTarget,
    Delivery,
    DeliveryResult,
)


class AlertSender(Protocol):
    """Sends one attempt of a delivery to its channel.

    - Never raises for what the receiver, the network or the channel does: every outcome
      is a DeliveryResult, whose `retryable` says whether the retry plan applies
      (notifications/outcomes.py has the rules).
    - Bounded: it returns within its configured timeouts (connecting, then the answer),
      whatever the receiver does.
    - Every attempt of a delivery carries the delivery's id (a webhook's `webhook-id`, an
      e-mail's Message-ID), so a receiver recognises a retry.
    - `now` is when the attempt is sent (a webhook's signed timestamp, an e-mail's Date);
      it has a zone.
    - Safe to call from several threads at once.
    """

    def send(self, delivery: Delivery, channel: ChannelTarget,
             now: datetime) -> DeliveryResult: ...


class DeliveryLog(Protocol):
    """Where each attempt of a delivery is recorded for the tenant to see: the notifier
    writes them to `<prefix>alert-deliveries`, the history projector to ClickHouse's
    alert_deliveries (infra/notifier/kafka_delivery_log.py).

    - At least once: an attempt recorded twice (a notifier that stopped before its
      position was committed) is the same row again, told apart by nothing but the time;
      readers take (delivery_id, attempt) as the key.
    - record() returns once the records are durable (acknowledged by the log), or raises
      LogUnavailable; the notifier keeps the delivery's state until they are."""

    def record(self, attempts: Sequence[AttemptRecord]) -> None: ...


@dataclass(frozen=True)
class ChannelEntry:
    """A live channel as the notifier sends to it: its name and what its sender needs."""

    name: str
    target: ChannelTarget
    # Deleted since the delivery was made: nothing is sent, the attempt is recorded failed.
    deleted: bool = False


class ChannelDirectory(Protocol):
    """The tenants' live channels (the `channels` table), with their signing secrets
    derived (notifications/signing.py). Each call one bounded read."""

    def named(self, tenant: str, names: Sequence[str]) -> dict[str, ChannelEntry]:
        """Those of `names` (at most MAX_CHANNELS_PER_JOB) that are live channels of the
        tenant."""

    def defaults(self, tenant: str) -> list[ChannelEntry]:
        """The tenant's live default channels (at most its channel limit)."""

    def by_id(self, channel_id: UUID) -> ChannelEntry | None:
        """The channel, deleted or not (`deleted` says); None if it never existed."""


class DeliveryStore(Protocol):
    """The notifier's durable state (PostgreSQL): each delivery until it is delivered or
    given up, by the alerts-topic partition its alert was read from; and which jobs are
    failing, for `recovered`. Raises StoreUnavailable when it cannot answer."""

    def add(self, partition: int, deliveries: Sequence[Delivery]) -> set[UUID]:
        """Keeps new deliveries; one kept already (its alert read again) is left as it is.
        Returns the ids of those that were new."""

    def pending(self, partitions: Collection[int], limit: int) -> list[tuple[int, Delivery]]:
        """Up to `limit` deliveries of these partitions not yet delivered or given up, the
        earliest due first, each with its partition."""

    def attempted(self, delivery: Delivery, outcome: AttemptOutcome,
                  next_attempt_at: datetime | None) -> None:
        """An attempt of the delivery ended: it is delivered, given up, or due again."""

    def set_failing(self, job_id: UUID, failing: bool, at: datetime) -> bool:
        """Marks the job failing (a dead letter) or not (a success); returns whether it
        was failing before."""
