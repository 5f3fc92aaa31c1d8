"""The notifier: alerts read from `<prefix>alerts` become deliveries to channels, sent fairly
across tenants, retried, recorded (docs/alerts.md).

The cycle, driven by the role's loop (infra/entrypoints/notifier.py):

- receive(): each alert record is routed (routing.py), throttled per job and kind
  (rules.Throttle: one message per interval, the rest in a digest), and becomes one
  delivery per channel of its audience, kept in the DeliveryStore before the alerts'
  position is committed (so an alert read is never lost) and queued (FairQueue).
- due(): the deliveries to send now, each with its channel as it is now (deleted since:
  the attempt fails at once).
- finished(): what an attempt came to is recorded (DeliveryLog) and kept (the store); a
  failed attempt is tried again by the retry plan, or the delivery given up, which the
  tenant's other default channels are told of (once: a failed delivery of that news is
  not news again).
- tick(): digests whose interval ended.
- adopt() and forget(): the alerts-topic partitions this notifier reads; their pending
  deliveries are loaded from the store, so another notifier carries on with them.

Bounded (invariant 12): the queue holds at most `max_total` deliveries, `max_per_tenant` of
one tenant (beyond, a delivery fails at once, recorded); a tenant has at most
`max_in_flight_per_tenant` being sent, a channel one; the throttle remembers at most
`throttle_keys` windows; one alert fans out to at most the rule's 5 channels or the
tenant's default channels (at most its channel limit)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

from cronlog.domain.notify_rule import AlertFact, AlertKind
from cronlog.notifications.fair_queue import FairQueue, QueueFull
from cronlog.notifications.model import (
    AlertMessage,
    AttemptOutcome,
    AttemptRecord,
    Delivery,
    DeliveryResult,
    RandomSource,
    TenantAlert,
)
from cronlog.notifications.ports import ChannelDirectory, ChannelEntry, DeliveryLog, DeliveryStore
from cronlog.notifications.retry_plan import RetryPlan, first_delivery
from cronlog.notifications.routing import recovered, route
from cronlog.notifications.rules import Throttle, ThrottleKey

FAILED_NAMESPACE = UUID("9d2e6a0b-41c7-4f38-b5e1-7c0a3d6f2e94")


@dataclass(frozen=True)
class ReceivedAlert:
    """An Alert record as read: its partition of the alerts topic, its fields, and where it
    was (topic, partition, offset), which names a v1 record's alert."""

    partition: int
    record: Mapping[str, Any]
    where: str


@dataclass(frozen=True)
class Send:
    """A delivery to attempt now, with its channel as it is now (deleted since, or None when
    it never existed: the attempt fails at once, not retried)."""

    delivery: Delivery
    channel: ChannelEntry | None


CHANNEL_GONE = DeliveryResult(ok=False, status_code=0, latency_ms=0,
                              error="the channel was deleted", retryable=False)


@dataclass(frozen=True)
class NotifierBounds:
    max_total: int = 10_000
    max_per_tenant: int = 1_000
    max_in_flight_per_tenant: int = 4
    throttle_keys: int = 10_000


class Notifier:
    def __init__(self, store: DeliveryStore, directory: ChannelDirectory, log_: DeliveryLog,
                 rng: RandomSource, plan: RetryPlan, throttle: Throttle,
                 bounds: NotifierBounds = NotifierBounds()) -> None:
        self._store = store
        self._directory = directory
        self._log = log_
        self._rng = rng
        self._plan = plan
        self._throttle = throttle
        self._bounds = bounds
        self._queue = self._new_queue()
        self._partitions: set[int] = set()
        self._partition_of: dict[UUID, int] = {}
        # Being sent now; a forget() meanwhile does not take them back.
        self._sending: dict[UUID, Delivery] = {}
        # Alerts offered to the throttle whose deliveries are not kept yet (the store
        # failed): read again, they are not throttled again. At most a batch of them.
        self._unkept: OrderedDict[UUID, list[AlertMessage]] = OrderedDict()
        self.channels_missing = 0
        # Who gets a key's digest: the last audience seen, at most twice the throttle's keys.
        self._audience: OrderedDict[ThrottleKey, tuple[int, tuple[str, ...] | None]] = \
            OrderedDict()

    def _new_queue(self) -> FairQueue:
        b = self._bounds
        return FairQueue(b.max_total, b.max_per_tenant, b.max_in_flight_per_tenant)

    @property
    def held(self) -> int:
        return len(self._queue)

    def next_wakeup(self) -> datetime | None:
        """When tick() or due() next have something to do."""
        times = [t for t in (self._queue.next_due(), self._throttle.next_flush_at())
                 if t is not None]
        return min(times, default=None)

    # -- partitions -------------------------------------------------------------------
    def adopt(self, partitions: Collection[int], now: datetime) -> None:
        """These partitions' deliveries are this notifier's now: load what is pending."""
        self._partitions |= set(partitions)
        for partition, delivery in self._store.pending(partitions, self._bounds.max_total):
            if delivery.delivery_id not in self._sending:
                self._queue_one(partition, delivery, now)

    def forget(self, partitions: Collection[int], now: datetime) -> None:
        """Another notifier reads these now: their deliveries are dropped here (the store
        keeps them); the queue is rebuilt with the others'."""
        self._partitions -= set(partitions)
        self._queue = self._new_queue()
        self._partition_of = {d: p for d, p in self._partition_of.items()
                              if p in self._partitions}
        if self._partitions:
            self.adopt(sorted(self._partitions), now)

    # -- alerts in ------------------------------------------------------------------
    def receive(self, alerts: Sequence[ReceivedAlert], now: datetime) -> None:
        """Routes, throttles and keeps the deliveries of these alerts; the caller commits
        their position afterwards."""
        for received in alerts:
            self._note_dead_letter(received.record, now)
            routed = route(received.record, received.where)
            if routed is None:
                continue
            message: AlertMessage | None = routed.alert
            if routed.fact is AlertFact.RUN_SUCCEEDED:
                # A success is news only after the job's dead letter.
                was = self._store.set_failing(routed.alert.job_id, False, now)
                message = recovered(routed.alert) if was else None
            if message is None:
                continue
            key = (message.tenant, message.job_id, message.kind)
            self._audience[key] = (received.partition, routed.channels)
            self._audience.move_to_end(key)
            while len(self._audience) > 2 * self._bounds.throttle_keys:
                self._audience.popitem(last=False)
            offered = self._unkept.get(message.alert_id)
            if offered is None:
                offered = self._unkept[message.alert_id] = self._throttle.offer(message, now)
                while len(self._unkept) > self._bounds.max_per_tenant:
                    self._unkept.popitem(last=False)
            for sent in offered:
                self._deliver(sent, now)
            self._unkept.pop(message.alert_id, None)

    def _note_dead_letter(self, record: Mapping[str, Any], now: datetime) -> None:
        """A dead letter of a job whose rule wants recoveries marks it failing, whether or
        not the rule wants the dead letter itself."""
        rule = record.get("notify")
        if (record.get("kind") == AlertFact.RUN_DEAD_LETTERED.value and rule is not None
                and AlertKind.RECOVERED.value in rule["on"]):
            self._store.set_failing(UUID(str(record["job_id"])), True, now)

    def tick(self, now: datetime) -> None:
        """Sends the digests of throttle windows that ended."""
        for digest in self._throttle.flush(now):
            self._deliver(digest, now)

    def _deliver(self, message: AlertMessage, now: datetime) -> None:
        partition, names = self._audience.get((message.tenant, message.job_id, message.kind),
                                              (min(self._partitions, default=0), None))
        if names is None:
            entries = self._directory.defaults(message.tenant)
        else:
            found = self._directory.named(message.tenant, names)
            # A channel deleted since the rule named it: nothing to send it to (the api
            # refuses a rule naming a missing one; this is a deletion later).
            self.channels_missing += len(names) - len(found)
            entries = [found[name] for name in names if name in found]
        self._deliver_to(message, entries, partition, now)

    def _deliver_to(self, message: AlertMessage, entries: Sequence[ChannelEntry],
                    partition: int, now: datetime) -> None:
        deliveries = [first_delivery(message, entry.target.channel_id, now)
                      for entry in entries]
        if not deliveries:
            return
        # Only new ones: a delivery kept before (its alert read again after a restart) is
        # pending in the store, loaded by adopt(), or already ended.
        new = self._store.add(partition, deliveries)
        for delivery in deliveries:
            if delivery.delivery_id in new:
                self._queue_one(partition, delivery, now)

    def _queue_one(self, partition: int, delivery: Delivery, now: datetime) -> None:
        try:
            if self._queue.add(delivery):
                self._partition_of[delivery.delivery_id] = partition
        except QueueFull as full:
            # Recorded as failed at once, never queued without bound (docs/alerts.md).
            entry = self._directory.by_id(delivery.channel_id)
            result = DeliveryResult(ok=False, status_code=0, latency_ms=0,
                                    error=f"not sent: {full}"[:500], retryable=False)
            self._end(delivery, entry, result, now, AttemptOutcome.FAILED, None)

    # -- sending ----------------------------------------------------------------------
    def due(self, now: datetime, limit: int) -> list[Send]:
        """Up to `limit` deliveries to attempt now (fair across tenants). One whose channel
        was deleted since fails at once, recorded, and is not among them."""
        sends = []
        for delivery in self._queue.take(now, limit):
            self._sending[delivery.delivery_id] = delivery
            send = Send(delivery, self._directory.by_id(delivery.channel_id))
            if send.channel is None or send.channel.deleted:
                self.finished(send, CHANNEL_GONE, now)
            else:
                sends.append(send)
        return sends

    def finished(self, send: Send, result: DeliveryResult, now: datetime) -> None:
        """What an attempt came to: recorded, kept, and retried or ended."""
        delivery = self._sending.pop(send.delivery.delivery_id, send.delivery)
        first_at = delivery.first_at or now
        retry_at = (self._plan.next_attempt_at(delivery.attempt, first_at, self._rng)
                    if result.retryable else None)
        outcome = (AttemptOutcome.DELIVERED if result.ok else
                   AttemptOutcome.RETRYING if retry_at is not None else AttemptOutcome.FAILED)
        held = delivery.delivery_id in self._queue
        self._end(delivery, send.channel, result, now, outcome, retry_at)
        if not held:
            return  # forgotten meanwhile: the store has it for whoever reads it now
        if retry_at is not None:
            self._queue.retry_at(delivery, retry_at)
        else:
            self._queue.done(delivery)
            self._partition_of.pop(delivery.delivery_id, None)

    def _end(self, delivery: Delivery, entry: ChannelEntry | None, result: DeliveryResult,
             now: datetime, outcome: AttemptOutcome, retry_at: datetime | None) -> None:
        if entry is not None:
            self._log.record([AttemptRecord(
                delivery if delivery.first_at else replace(delivery, first_at=now),
                entry.name, entry.target.kind, result, now, outcome, retry_at)])
        self._store.attempted(delivery, outcome, retry_at)
        if outcome is AttemptOutcome.FAILED:
            self._tell_others(delivery, entry, result, now)

    def _tell_others(self, delivery: Delivery, entry: ChannelEntry | None,
                     result: DeliveryResult, now: datetime) -> None:
        alert = delivery.alert
        if alert.kind is TenantAlert.DELIVERY_FAILED:
            return  # news of a failed delivery is not news again
        others = [e for e in self._directory.defaults(alert.tenant)
                  if e.target.channel_id != delivery.channel_id]
        name = entry.name if entry is not None else str(delivery.channel_id)
        news = AlertMessage(
            alert_id=uuid5(FAILED_NAMESPACE, delivery.delivery_id.hex), tenant=alert.tenant,
            kind=TenantAlert.DELIVERY_FAILED, job_id=alert.job_id, job_name=alert.job_name,
            run_id=alert.run_id, attempt=alert.attempt,
            message=(f"the {alert.kind.value} alert of job {alert.job_name or alert.job_id} "
                     f"could not be delivered to channel {name!r} after {delivery.attempt} "
                     f"attempts: {result.error}"), at=now)
        self._deliver_to(news, others, self._partition_of.get(delivery.delivery_id, 0), now)
