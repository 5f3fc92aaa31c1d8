"""The worker's transport in memory: a dispatch source whose polls hand out what a test
put in, and a report sink that keeps what the worker sent."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from cronlog.ports import InboundMessage

T0 = datetime(2026, 1, 1, tzinfo=UTC)  # where the worker tests' clocks start


@dataclass
class Source:
    messages: list[InboundMessage] = field(default_factory=list)
    commits: list[dict[int, int]] = field(default_factory=list)

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        out, self.messages = self.messages, []
        return out

    def commit(self, next_offsets: Mapping[int, int]) -> None:
        self.commits.append(dict(next_offsets))

    def on_revoke(self, listener: Callable[[list[int]], None]) -> None:
        self.revoke = listener

    def close(self) -> None:
        pass


@dataclass
class Sink:
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    prepared: list[str] = field(default_factory=list)

    def send(self, key: str, name: str, record: Mapping[str, Any]) -> None:
        with self.lock:
            self.sent.append((name, dict(record)))

    def prepare(self, key: str) -> None:
        self.prepared.append(key)

    def ship(self) -> None:
        pass

    @property
    def gathered(self) -> int:
        return 0  # sent at once

    def flush(self, timeout: float) -> None:
        pass


def dispatch(offset: int, not_before: datetime, handler: str = "echo",
             **fields: Any) -> InboundMessage:
    """A dispatch of one attempt; `fields` replace or add to its record's."""
    return InboundMessage("dispatch.q", 0, offset, "Dispatch", {
        "run_id": uuid4(), "job_id": uuid4(), "attempt": 1, "tenant": "t", "handler": handler,
        "payload": b"hi", "scheduled_at": not_before, "not_before": not_before,
        "timeout_ms": 1000, "heartbeat_timeout_ms": 60_000, "idempotency_key": "k",
        **fields}, b"")
