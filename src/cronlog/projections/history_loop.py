"""Feeds committed run events to the history projector in batches, committing after each."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from cronlog.ports import (
    UNREADABLE,
    Clock,
    InboundMessage,
    LogUnavailable,
    StoreUnavailable,
    StoreUnreachable,
)

log = logging.getLogger(__name__)


class EventFeed(Protocol):
    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]: ...

    def commit(self, applied: Sequence[InboundMessage]) -> None:
        """Raises LogUnavailable when the log cannot take the offsets now."""

    def close(self) -> None: ...


class BatchProjector(Protocol):
    def apply_batch(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None: ...


class RejectedEvents(Protocol):
    """Where events the history store cannot take are set aside, with their error."""

    def reachable(self) -> bool: ...

    def set_aside(self, message: InboundMessage, error: str, at: datetime) -> None: ...


class HistoryMetrics(Protocol):
    """What the loop tells operators (infra/observability/projector.py makes it metrics and
    readiness)."""

    def batch_received(self, events: int, oldest: datetime | None) -> None:
        """A batch polled from the log, now held until it is stored (0: nothing waiting)."""

    def events_applied(self, kinds: Mapping[str, int], newest: datetime | None) -> None:
        """Events stored and committed, by name; the newest one's time, when they have one."""

    def event_set_aside(self, reason: str) -> None: ...


class NoHistoryMetrics:
    def batch_received(self, events: int, oldest: datetime | None) -> None:
        pass

    def events_applied(self, kinds: Mapping[str, int], newest: datetime | None) -> None:
        pass

    def event_set_aside(self, reason: str) -> None:
        pass


# Why an event was set aside, as a metric's label: the projection's own refusals by name,
# anything else the store refused as one reason, so the label's values stay few.
SET_ASIDE_REASONS = {"UnknownRunEvent": "unknown_event", "MissingRun": "missing_run",
                     "RunCreatedTwice": "created_twice", "UnstorableEvent": "unstorable",
                     "UnknownDeliveryRecord": "unknown_event"}
UNREADABLE_REASON = "unreadable"
OTHER_REASON = "refused"


# A batch that keeps failing while the store answers is retried this often before the
# loop looks for the event at fault; a single event as often before it is set aside.
ATTEMPTS_BEFORE_BLAME = 3


class HistoryProjectorLoop:
    def __init__(self, feed: EventFeed, projector: BatchProjector, clock: Clock,
                 rejected: RejectedEvents, batch_size: int = 2000, poll_timeout: float = 0.5,
                 report_every: float = 30.0, retry_delay: float = 0.5,
                 metrics: HistoryMetrics | None = None) -> None:
        self._feed = feed
        self._metrics = metrics or NoHistoryMetrics()
        self._projector = projector
        self._rejected = rejected
        self._retry_delay = retry_delay
        self.set_aside = 0
        self._batch_size = batch_size
        self._poll_timeout = poll_timeout
        self._stop = threading.Event()
        self._clock = clock
        self.lag = timedelta(0)
        self._report_every = report_every
        self._last_report = time.monotonic()
        self._chores: list[tuple[float, Callable[[], object], list[float]]] = []
        self._last_error = ""
        self._last_reason = OTHER_REASON
        # The events of the current batch that were set aside.
        self._aside_now: set[tuple[str, int, int]] = set()

    def every(self, seconds: float, chore: Callable[[], object]) -> None:
        """Runs chore (e.g. retention) between batches, at most once per interval."""
        self._chores.append((seconds, chore, [time.monotonic() - seconds]))

    def _run_chores(self) -> None:
        now = time.monotonic()
        for interval, chore, last in self._chores:
            if now - last[0] >= interval:
                last[0] = now
                chore()

    def stop(self) -> None:
        self._stop.set()

    def step(self) -> int:
        batch = self._feed.poll(self._poll_timeout, self._batch_size)
        self._metrics.batch_received(len(batch), min(_times(batch), default=None))
        if batch:
            self._aside_now.clear()
            self._apply_until_stored(batch)
            self._commit(batch)
            self._report_lag(batch)
        return len(batch)

    def _commit(self, batch: Sequence[InboundMessage]) -> None:
        try:
            self._feed.commit(batch)
        except LogUnavailable as exc:
            # The batch is stored: its offsets go with the next batch's commit, or, should
            # the projector restart or its partitions move first, it is read and written
            # again, which the history's tables absorb (ReplacingMergeTree). Exiting here
            # stopped the projector for good while Kafka was away for 45 s.
            log.warning("offsets of %d applied events not committed (%s): committed with "
                        "the next batch's, or read again", len(batch), exc)

    def _apply_until_stored(self, batch: Sequence[InboundMessage]) -> None:
        """Retries for as long as the store is away (offsets stay put, so nothing is lost).
        When the store answers and the batch still fails, the fault is in the batch: the
        events are tried in halves down to the one at fault, which is set aside, so one
        event cannot hold back the history of every run behind it (invariant 9)."""
        if not self._stored(batch):
            self._isolate(batch)

    def _stored(self, events: Sequence[InboundMessage]) -> bool:
        """Applies the events; False once they failed ATTEMPTS_BEFORE_BLAME times while
        the store answered."""
        delay, failures = self._retry_delay, 0
        while True:
            unreadable = next((m for m in events if m.name == UNREADABLE), None)
            if unreadable is not None:
                return False
            try:
                self._projector.apply_batch([(m.name, dict(m.record)) for m in events])
                return True
            except Exception as exc:
                if self._stop.is_set():
                    raise
                # A store that did not answer the write (a restart: the ping may already
                # reach the new server) says nothing of the batch.
                if not isinstance(exc, StoreUnreachable) and self._rejected.reachable():
                    failures += 1
                    if failures >= ATTEMPTS_BEFORE_BLAME:
                        self._last_error = f"{type(exc).__name__}: {exc}"[:1000]
                        self._last_reason = SET_ASIDE_REASONS.get(type(exc).__name__,
                                                                  OTHER_REASON)
                        return False
                    log.warning("history batch of %d events failed (%d), retrying: %s",
                                len(events), failures, exc)
                elif not isinstance(exc, StoreUnavailable):
                    log.warning("history batch failed and the store does not answer: %s", exc)
                else:
                    log.warning("history store unavailable, retrying in %.1fs: %s", delay, exc)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _isolate(self, events: Sequence[InboundMessage]) -> None:
        if len(events) == 1:
            self._set_aside(events[0])
            return
        middle = len(events) // 2
        for half in (events[:middle], events[middle:]):
            if not self._stored(half):
                self._isolate(half)

    def _set_aside(self, message: InboundMessage) -> None:
        error = (str(message.record.get("error") or "unreadable")
                 if message.name == UNREADABLE else self._last_error)
        log.error("history projector set aside %s at %s[%d]@%d: %s", message.name,
                  message.topic, message.partition, message.offset, error)
        while True:
            try:
                self._rejected.set_aside(message, error, self._clock.now())
                self.set_aside += 1
                self._aside_now.add((message.topic, message.partition, message.offset))
                self._metrics.event_set_aside(UNREADABLE_REASON if message.name == UNREADABLE
                                              else self._last_reason)
                return
            except StoreUnavailable as exc:
                if self._stop.is_set():
                    raise
                log.warning("could not record the rejected event, retrying: %s", exc)
                time.sleep(self._retry_delay)

    def _report_lag(self, batch: Sequence[InboundMessage]) -> None:
        # Set-aside events are counted as such, not as applied.
        kinds: dict[str, int] = {}
        for m in batch:
            if (m.topic, m.partition, m.offset) not in self._aside_now:
                kinds[m.name] = kinds.get(m.name, 0) + 1
        newest = max(_times(batch), default=None)
        self._metrics.events_applied(kinds, newest)
        if newest is None:
            return
        self.lag = self._clock.now() - newest
        if time.monotonic() - self._last_report >= self._report_every:
            self._last_report = time.monotonic()
            log.info("history projector lag: %.1fs behind the newest event applied",
                     self.lag.total_seconds())

    def run_forever(self) -> None:
        try:
            while not self._stop.is_set():
                self.step()
                self._run_chores()
        finally:
            self._feed.close()


def _times(batch: Sequence[InboundMessage]) -> list[datetime]:
    return [m.record["at"] for m in batch if isinstance(m.record.get("at"), datetime)]
