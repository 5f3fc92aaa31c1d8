"""Feeds committed run events to the history projector in batches, committing after each."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol

from cronlog.commands.ports import Clock, InboundMessage, StoreUnavailable

log = logging.getLogger(__name__)


class EventFeed(Protocol):
    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]: ...

    def commit(self, applied: Sequence[InboundMessage]) -> None: ...

    def close(self) -> None: ...


class BatchProjector(Protocol):
    def apply_batch(self, events: Sequence[tuple[str, dict[str, Any]]]) -> None: ...


class HistoryProjectorLoop:
    def __init__(self, feed: EventFeed, projector: BatchProjector, clock: Clock,
                 batch_size: int = 2000, poll_timeout: float = 0.5,
                 report_every: float = 30.0) -> None:
        self._feed = feed
        self._projector = projector
        self._batch_size = batch_size
        self._poll_timeout = poll_timeout
        self._stop = threading.Event()
        self._clock = clock
        self.lag = timedelta(0)
        self._report_every = report_every
        self._last_report = time.monotonic()
        self._chores: list[tuple[float, Callable[[], object], list[float]]] = []

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
        if batch:
            self._apply_until_stored(batch)
            self._feed.commit(batch)
            self._report_lag(batch)
        return len(batch)

    def _apply_until_stored(self, batch: Sequence[InboundMessage]) -> None:
        """Retries while the store is away (offsets stay put, so nothing is lost); any
        other error propagates: the projection stops rather than skip an event."""
        delay = 0.5
        while True:
            try:
                self._projector.apply_batch([(m.name, dict(m.record)) for m in batch])
                return
            except StoreUnavailable as exc:
                if self._stop.is_set():
                    raise
                log.warning("history store unavailable, retrying in %.1fs: %s", delay, exc)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _report_lag(self, batch: Sequence[InboundMessage]) -> None:
        newest = max(m.record["at"] for m in batch)
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
