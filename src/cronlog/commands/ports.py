"""The small interfaces through which the write side talks to the outside world."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


Record = Mapping[str, Any]

# The name an inbox message gets when its bytes do not decode: the owner sets it aside.
UNREADABLE = "Unreadable"


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

    def on_revoke(self, listener: Callable[[list[int]], None]) -> None: ...

    def close(self) -> None: ...


class ReportSink(Protocol):
    """Where workers send what happened to an attempt (the inbox)."""

    def send(self, key: str, name: str, record: Record) -> None: ...

    def prepare(self, key: str) -> None:
        """Reports with this key will follow (a dispatch arrived): whatever work per key
        the sink has, it does now, not when the run starts."""

    def ship(self) -> None:
        """Sends what send() may have gathered; called every time round the worker's loop."""

    def flush(self, timeout: float) -> None: ...


class TransactionRejected(RuntimeError):
    """The owner's Kafka transaction did not commit (or its outcome is unknown).

    fenced: this process is no longer the owner of its partitions (KIP-447 generation fencing,
    or another producer took its transactional id).
    """

    fenced: bool = False


class StoreUnavailable(RuntimeError):
    """The state store cannot be read or written right now."""


class LogUnavailable(RuntimeError):
    """The Kafka log cannot be read right now (e.g. while a broker restarts)."""


class ReportsNotDelivered(RuntimeError):
    """Worker reports are not acknowledged by the log yet (e.g. while a broker restarts)."""


class EpochLost(RuntimeError):
    """A newer owner took the partition's epoch: this owner's writes are refused."""
