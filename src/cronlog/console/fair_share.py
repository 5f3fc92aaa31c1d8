"""Shares of a bounded resource among tenants: the console's ClickHouse connections and its
page threads. A tenant holds at most `share` of `capacity` units at once, so however many
pages one tenant opens, `capacity - share` units stay for the others (invariant 12).

ShareLedger is the bookkeeping (pure, no waiting); FairPool hands out pooled connections
to threads through it, waiting at most a given time for a unit."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


def share_of(capacity: int, fraction: float) -> int:
    """The units one tenant may hold: the fraction of the capacity, rounded down, at least
    one (a capacity of 1 leaves nothing to share: its one tenant takes it)."""
    return max(1, min(capacity, math.floor(capacity * fraction)))


class ShareLedger:
    """How many units each tenant holds. take() succeeds while a unit is free and the
    tenant holds fewer than its share; O(1) each."""

    def __init__(self, capacity: int, share: int) -> None:
        if capacity < 1 or not 1 <= share <= capacity:
            raise ValueError(f"capacity {capacity} and share {share}: need 1 <= share <= capacity")
        self.capacity = capacity
        self.share = share
        self._held: dict[str, int] = {}
        self._in_use = 0

    def may_take(self, tenant: str) -> bool:
        return self._in_use < self.capacity and self._held.get(tenant, 0) < self.share

    def take(self, tenant: str) -> bool:
        if not self.may_take(tenant):
            return False
        self._held[tenant] = self._held.get(tenant, 0) + 1
        self._in_use += 1
        return True

    def give(self, tenant: str) -> None:
        held = self._held.get(tenant, 0)
        if held <= 0:
            raise ValueError(f"tenant {tenant!r} holds no unit")
        if held == 1:
            del self._held[tenant]
        else:
            self._held[tenant] = held - 1
        self._in_use -= 1

    def held(self, tenant: str) -> int:
        return self._held.get(tenant, 0)

    @property
    def in_use(self) -> int:
        return self._in_use


class PoolBusy(Exception):
    """No unit within the time allowed: the tenant's share was in use (or every unit)."""


class FairPool(Generic[T]):
    """`capacity` connections made on first need and kept, leased to threads through a
    ShareLedger. lease() waits at most `timeout` seconds, then raises PoolBusy."""

    def __init__(self, make: Callable[[], T], capacity: int, share: int,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._make = make
        self._ledger = ShareLedger(capacity, share)
        self._idle: list[T] = []
        self._cond = threading.Condition()
        self._monotonic = monotonic

    @property
    def share(self) -> int:
        return self._ledger.share

    @contextmanager
    def lease(self, tenant: str, timeout: float) -> Iterator[T]:
        deadline = self._monotonic() + timeout
        with self._cond:
            while not self._ledger.take(tenant):
                left = deadline - self._monotonic()
                if left <= 0:
                    raise PoolBusy(
                        f"no history connection within {timeout:.1f} s (tenant holds "
                        f"{self._ledger.held(tenant)} of its {self._ledger.share}, "
                        f"{self._ledger.in_use} of {self._ledger.capacity} in use)")
                self._cond.wait(left)
            item = self._idle.pop() if self._idle else None
        try:
            if item is None:
                item = self._make()
            yield item
        finally:
            with self._cond:
                if item is not None:
                    self._idle.append(item)
                self._ledger.give(tenant)
                self._cond.notify_all()
