"""Takeovers: partitions an owner has claimed but not caught up with yet.

Invariant 3: nothing of a partition is decided before its committed events are applied.
Each takeover reads the log of all the partitions it claimed at once, a while per owner
cycle, and hands back each partition as soon as that one has caught up: the owner fires it
then, while the others are still being read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from cronlog.commands.owner.ports import CatchUp, Claim, LogReplay


@dataclass
class _Takeover:
    catch_up: CatchUp
    # The claims still wanted: a partition revoked meanwhile is dropped from here.
    claims: dict[int, Claim]
    started: float


@dataclass(frozen=True)
class CaughtUp:
    claims: list[Claim]
    # Since the partitions were claimed.
    seconds: float


class Takeovers:
    def __init__(self, replay: LogReplay,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._replay = replay
        self._monotonic = monotonic
        self._running: list[_Takeover] = []

    def __bool__(self) -> bool:
        return bool(self._running)

    def start(self, claims: Sequence[Claim], since: float | None = None) -> None:
        """Starts catching up; `since` is when taking the partitions began (before their
        epochs were claimed), for the time each takeover reports."""
        began = self._monotonic() if since is None else since
        if claims:
            self._running.append(_Takeover(self._replay.start(claims),
                                           {c.partition: c for c in claims}, began))

    def drop(self, partitions: Collection[int]) -> None:
        """Partitions no longer this owner's, or claimed again: their catch-up is not
        wanted any more (their epochs changed, so its writes are refused anyway)."""
        for takeover in self._running:
            for partition in partitions:
                takeover.claims.pop(partition, None)
        self._close_unwanted()

    def advance(self, seconds: float) -> list[CaughtUp]:
        """Reads for about `seconds` at most in all; returns what caught up meanwhile."""
        until = self._monotonic() + seconds
        found: list[CaughtUp] = []
        for takeover in list(self._running):
            left = max(until - self._monotonic(), 0.0)
            ready = [takeover.claims.pop(c.partition) for c in takeover.catch_up.advance(left)
                     if takeover.claims.get(c.partition) == c]
            if ready:
                found.append(CaughtUp(ready, self._monotonic() - takeover.started))
            if takeover.catch_up.finished:
                takeover.claims.clear()
        self._close_unwanted()
        return found

    def clear(self) -> None:
        for takeover in self._running:
            takeover.claims.clear()
        self._close_unwanted()

    def _close_unwanted(self) -> None:
        for takeover in [t for t in self._running if not t.claims]:
            takeover.catch_up.close()
            self._running.remove(takeover)
