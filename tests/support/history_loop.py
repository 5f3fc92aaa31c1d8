"""The history loop's ports in memory: the feed of run and job events, a projector that
fails on demand, and the store of events set aside."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cronlog.ports import InboundMessage, StoreUnavailable

AT = datetime(2026, 12, 4, tzinfo=UTC)


def event(n: int, poison: bool = False) -> InboundMessage:
    """The `n`th run event; a poisoned one is one the Projector cannot write."""
    return InboundMessage("run-events", 0, n, "RunScheduled",
                          {"n": n, "at": AT, "poison": poison}, b"raw")


@dataclass
class Feed:
    batches: list[list[InboundMessage]]
    committed: list[InboundMessage] = field(default_factory=list)

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        return self.batches.pop(0) if self.batches else []

    def commit(self, applied: Sequence[InboundMessage]) -> None:
        self.committed.extend(applied)

    def close(self) -> None:
        pass


@dataclass
class Projector:
    """Stores events unless they are poison; unavailable for the first `down` calls."""

    down: int = 0
    stored: list[int] = field(default_factory=list)
    calls: int = 0
    # What the first `down` calls raise: a store that answers with an error, by default.
    away: type[StoreUnavailable] = StoreUnavailable

    def apply_batch(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        self.calls += 1
        if self.calls <= self.down:
            raise self.away("connection refused")
        if any(record.get("poison") for _, record in events):
            raise OverflowError("date value out of range")
        self.stored.extend(int(record["n"]) for _, record in events)


@dataclass
class Rejected:
    """Keeps each message set aside with its error; unreachable while `up` is False."""

    up: bool = True
    aside: list[tuple[InboundMessage, str]] = field(default_factory=list)

    def reachable(self) -> bool:
        return self.up

    def set_aside(self, message: InboundMessage, error: str, at: datetime) -> None:
        self.aside.append((message, error))

    def offsets(self) -> list[tuple[int, str]]:
        """What was set aside, by the offset of each message."""
        return [(message.offset, error) for message, error in self.aside]
