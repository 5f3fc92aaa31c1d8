"""Ownership: which inbox partitions this owner holds, at which epochs.

Partitions the group assigns are claimed together (new epochs in one round trip) and each
is owned once it has caught up with its log (invariant 3): its inbox is held back until
then, and the api learns it is ready only then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime

from cronlog.commands.owner_ports import (
    LogReplay,
    NoOwnerMetrics,
    OwnerMetrics,
    OwnerStore,
    OwnerTransport,
)
from cronlog.commands.takeovers import Takeovers

log = logging.getLogger(__name__)

# Seconds of catching up per owner cycle while partitions are being taken: the partitions
# already owned fire in between.
CATCH_UP_PER_CYCLE = 0.25


class Ownership:
    def __init__(self, owner_id: str, transport: OwnerTransport, store: OwnerStore,
                 replay: LogReplay, forget: Callable[[set[int]], None],
                 adopt: Callable[[Sequence[int], datetime], None],
                 monotonic: Callable[[], float] = time.monotonic,
                 metrics: OwnerMetrics | None = None) -> None:
        """`forget` drops what the other collaborators know of partitions; `adopt` has them
        load a caught-up partition's runs in flight."""
        self._owner_id = owner_id
        self._transport = transport
        self._store = store
        self._forget_elsewhere = forget
        self._adopt = adopt
        self._monotonic = monotonic
        self._metrics = metrics or NoOwnerMetrics()
        self._takeovers = Takeovers(replay, monotonic)
        self.epochs: dict[int, int] = {}

    @property
    def catching_up(self) -> bool:
        return bool(self._takeovers)

    def take(self, partitions: Sequence[int], now: datetime) -> None:
        began = self._monotonic()
        self.forget(partitions)
        # Their inbox waits until they have caught up: nothing of theirs is decided, or
        # committed as consumed, before.
        self._transport.hold(partitions)
        # Every partition at once: one Postgres round trip for the epochs, one reader of the
        # log for the catch-up.
        claims = self._store.take_epochs(partitions, self._owner_id)
        self._metrics.partitions_claimed(len(claims))
        self._takeovers.start(claims, since=began)
        # Those with little to replay are owned at once; the others catch up over the next
        # cycles, a while each, so the partitions already owned keep firing.
        self.catch_up(now)

    def catch_up(self, now: datetime) -> None:
        """Applies more of the claimed partitions' log; those caught up are this owner's
        from now on. Bounded per cycle, so the partitions already owned keep firing."""
        for caught_up in self._takeovers.advance(CATCH_UP_PER_CYCLE):
            claims = caught_up.claims
            partitions = [c.partition for c in claims]
            self._adopt(partitions, now)
            for claim in claims:
                self.epochs[claim.partition] = claim.epoch
            # Told only now: the api answers "ready" when every partition's group member
            # has caught up (nothing answers ready before it is).
            self._store.caught_up(claims, self._transport.group_member)
            self._transport.release(partitions)
            self._metrics.caught_up(len(partitions), caught_up.seconds)
            log.info("owner %s took partitions %s at epochs %s in %.2fs", self._owner_id,
                     partitions, sorted({c.epoch for c in claims}), caught_up.seconds)

    def forget(self, partitions: Collection[int]) -> None:
        """Drops partitions no longer this owner's, or taken anew."""
        gone = set(partitions)
        self._takeovers.drop(gone)
        for partition in gone:
            self.epochs.pop(partition, None)
        self._forget_elsewhere(gone)

    def lose_all(self) -> None:
        """Fenced for good: nothing is this owner's any more."""
        self._takeovers.clear()
        self.epochs.clear()
