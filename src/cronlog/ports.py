"""The interfaces every side shares: the clock, messages read from the log, and the
outside world's failures that each side answers by retrying."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple, Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


Record = Mapping[str, Any]

# The name an inbox message gets when its bytes do not decode: the owner sets it aside.
UNREADABLE = "Unreadable"


class InboundMessage(NamedTuple):
    """One decoded message from a partitioned topic.

    A named tuple rather than a frozen dataclass: an owner makes one for every record it
    reads and every record it produces (several per run), and a frozen dataclass's
    __init__, which sets each field through object.__setattr__, cost four times as much."""

    topic: str
    partition: int
    offset: int
    name: str
    record: Record
    raw: bytes
    # The record's key (a job's or a calendar's id), where known: with fewer Kafka than
    # logical partitions it says which logical partition a record belongs to
    # (domain/partition_layout.py).
    key: str | None = None


class StoreUnavailable(RuntimeError):
    """The state store cannot be read or written right now."""


class StoreUnreachable(StoreUnavailable):
    """The store could not be talked to at all (refused, reset, timed out): whatever was
    being written, it is not what is at fault."""


class LogUnavailable(RuntimeError):
    """The Kafka log cannot be read right now (e.g. while a broker restarts)."""
