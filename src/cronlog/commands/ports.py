"""The small interfaces through which the write side talks to the outside world."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


Record = Mapping[str, Any]


@dataclass(frozen=True)
class InboundMessage:
    """One decoded message from a partitioned topic."""

    topic: str
    partition: int
    offset: int
    name: str
    record: Record
    raw: bytes


class DispatchSource(Protocol):
    """The dispatch topic of a queue, consumed as a member of the queue's worker group."""

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]: ...

    def commit(self, next_offsets: Mapping[int, int]) -> None: ...

    def close(self) -> None: ...


class ReportSink(Protocol):
    """Where workers send what happened to an attempt (the inbox)."""

    def send(self, key: str, name: str, record: Record) -> None: ...

    def flush(self, timeout: float) -> None: ...
