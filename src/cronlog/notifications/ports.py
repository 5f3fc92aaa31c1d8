"""What the notifier needs from the outside to deliver: a sender per kind of channel
(infra/notifier/ implements them: webhook, Slack, e-mail)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from cronlog.notifications.model import AttemptRecord, ChannelTarget, Delivery, DeliveryResult


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
