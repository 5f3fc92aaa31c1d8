"""Feeds committed run events to the history projector in batches, committing after each."""

from __future__ import annotations

import threading
from collections.abc import Sequence
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
        finally:
            self._feed.close()
