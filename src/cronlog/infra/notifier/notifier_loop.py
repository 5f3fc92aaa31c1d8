"""The notifier role's loop: read alerts, keep their deliveries, commit their position; send
what is due on a pool of senders; record what each attempt came to (notifications/
notifier.py decides all of it; this only drives it and waits).

Reading and deciding happen on the loop's thread only; the senders' threads only send
(AlertSender.send is bounded by its timeouts), so a slow receiver holds one sender, never
the loop. A batch whose deliveries could not be kept (the store or the log unavailable) is
kept in hand and tried again before anything more is read: its position is committed only
once they are."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime
from typing import Protocol

from cronlog.domain.catalogue import OwnerRecord
from cronlog.notifications.model import DeliveryResult
from cronlog.notifications.notifier import Notifier, ReceivedAlert, Send
from cronlog.notifications.ports import AlertSender
from cronlog.ports import Clock, InboundMessage, LogUnavailable, StoreUnavailable

log = logging.getLogger(__name__)

# The longest the loop waits for alerts, finished sends or due deliveries at once.
LONGEST_WAIT = 0.5
POLL_BATCH = 200
# After the store or the log failed, before trying again.
BACK_OFF = 1.0


class AlertFeed(Protocol):
    """The alerts topic read by a consumer group (infra/kafka/event_feed.py)."""

    @property
    def assignment(self) -> frozenset[tuple[str, int]] | None: ...

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]: ...

    def commit(self, applied: Sequence[InboundMessage]) -> None: ...

    def close(self) -> None: ...


class NotifierMetrics(Protocol):
    def alerts_read(self, count: int) -> None: ...

    def attempted(self, channel_kind: str, outcome: str) -> None: ...

    def holding(self, deliveries: int) -> None: ...


class NotifierLoop:
    def __init__(self, feed: AlertFeed, notifier: Notifier, sender: AlertSender,
                 clock: Clock, senders: int, metrics: NotifierMetrics | None = None,
                 prune: Callable[[datetime], None] | None = None) -> None:
        self._feed = feed
        self._notifier = notifier
        self._sender = sender
        self._clock = clock
        self._senders = senders
        self._metrics = metrics
        self._prune = prune
        self._pool = ThreadPoolExecutor(senders, thread_name_prefix="notifier-send")
        self._sending: dict[Future[DeliveryResult], Send] = {}
        self._partitions: frozenset[int] = frozenset()
        self._in_hand: list[InboundMessage] = []
        self._stop = threading.Event()
        self._pruned_at: datetime | None = None

    def stop(self) -> None:
        self._stop.set()

    def run_forever(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.run_once()
                except (StoreUnavailable, LogUnavailable) as exc:
                    log.warning("notifier: %s; trying again", exc)
                    self._stop.wait(BACK_OFF)
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._feed.close()

    def run_once(self) -> None:
        now = self._clock.now()
        self._follow_assignment(now)
        if self._in_hand:
            self._keep(self._in_hand, now)
        messages = self._feed.poll(self._wait(now), POLL_BATCH)
        now = self._clock.now()
        if messages:
            self._keep(list(messages), now)
        self._notifier.tick(now)
        self._finish(now)
        self._send(now)
        self._maybe_prune(now)
        if self._metrics is not None:
            self._metrics.holding(self._notifier.held)

    def _follow_assignment(self, now: datetime) -> None:
        assigned = self._feed.assignment
        partitions = frozenset(p for _, p in assigned) if assigned is not None \
            else self._partitions
        gone, new = self._partitions - partitions, partitions - self._partitions
        self._partitions = partitions
        if gone:
            self._notifier.forget(gone, now)
        if new:
            self._notifier.adopt(new, now)

    def _wait(self, now: datetime) -> float:
        if self._in_hand or (self._sending and any(f.done() for f in self._sending)):
            return 0.0
        wake = self._notifier.next_wakeup()
        if wake is None:
            return LONGEST_WAIT
        return max(0.0, min(LONGEST_WAIT, (wake - now).total_seconds()))

    def _keep(self, messages: list[InboundMessage], now: datetime) -> None:
        self._in_hand = messages
        alerts = []
        for m in messages:
            if m.name != OwnerRecord.ALERT:
                log.warning("notifier: %s at %s[%d]@%d is not an alert; left alone",
                            m.name, m.topic, m.partition, m.offset)
                continue
            alerts.append(ReceivedAlert(m.partition, m.record,
                                        f"{m.topic}/{m.partition}/{m.offset}"))
        self._notifier.receive(alerts, now)
        self._feed.commit(messages)
        self._in_hand = []
        if self._metrics is not None:
            self._metrics.alerts_read(len(alerts))

    def _finish(self, now: datetime) -> None:
        for future in [f for f in self._sending if f.done()]:
            send = self._sending.pop(future)
            try:
                result = future.result()
            except Exception as exc:  # a sender's bug: the attempt fails, is not retried
                log.exception("notifier: sending delivery %s raised",
                              send.delivery.delivery_id)
                result = DeliveryResult(ok=False, status_code=0, latency_ms=0,
                                        error=f"the sender failed: {type(exc).__name__}")
            self._notifier.finished(send, result, now)
            if self._metrics is not None and send.channel is not None:
                outcome = "delivered" if result.ok else \
                    "retrying" if result.retryable else "failed"
                self._metrics.attempted(send.channel.target.kind.value, outcome)

    def _send(self, now: datetime) -> None:
        free = self._senders - len(self._sending)
        for send in self._notifier.due(now, free):
            self._sending[self._pool.submit(self._attempt, send)] = send
        if self._sending and not any(f.done() for f in self._sending):
            # Nothing else to do until one finishes, or the next poll is due.
            wait(list(self._sending), timeout=0.05, return_when=FIRST_COMPLETED)

    def _attempt(self, send: Send) -> DeliveryResult:
        assert send.channel is not None  # due() answers a deleted one itself
        return self._sender.send(send.delivery, send.channel.target, self._clock.now())

    def _maybe_prune(self, now: datetime) -> None:
        if self._prune is None:
            return
        if self._pruned_at is None or (now - self._pruned_at).total_seconds() >= 3600:
            self._pruned_at = now
            self._prune(now)
