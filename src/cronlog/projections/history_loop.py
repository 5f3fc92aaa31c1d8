"""Feeds committed run events to the history projector in batches, committing after each."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from cronlog.commands.ports import InboundMessage


class EventFeed(Protocol):
    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]: ...

    def commit(self, applied: Sequence[InboundMessage]) -> None: ...

    def close(self) -> None: ...


class BatchProjector(Protocol):
    def apply_batch(self, events: Sequence[tuple[str, dict[str, Any]]]) -> None: ...


class HistoryProjectorLoop:
    def __init__(self, feed: EventFeed, projector: BatchProjector, batch_size: int = 2000,
                 poll_timeout: float = 0.5) -> None:
        self._feed = feed
        self._projector = projector
        self._batch_size = batch_size
        self._poll_timeout = poll_timeout
        self._stop = threading.Event()
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
            # An error here propagates: the projection stops rather than skip an event.
            self._projector.apply_batch([(m.name, dict(m.record)) for m in batch])
            self._feed.commit(batch)
        return len(batch)

    def run_forever(self) -> None:
        try:
            while not self._stop.is_set():
                self.step()
                self._run_chores()
        finally:
            self._feed.close()
