"""Ownership: which inbox partitions this owner holds, at which epochs.

Partitions the group assigns are claimed together (new epochs in one round trip) and each
is owned once it has caught up with its log (invariant 3): its inbox is held back until
then, and the api learns it is ready only then.

The group assigns Kafka partitions; owning Kafka partition k means owning every logical
partition of k (domain/partition_layout.py, docs/partitions.md): the epochs of all of them
are taken in the same round trip, the catch-up reads Kafka partition k once from its
anchor's offsets, and the owned set the store is asked about (due jobs, runs in flight,
calendars, dependencies) is logical.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime

from cronlog.commands.owner.ports import (
    Claim,
    DepartedOwnerFence,
    LogReplay,
    NoOwnerMetrics,
    OwnerMetrics,
    OwnerStore,
    OwnerTransport,
)
from cronlog.commands.owner.takeovers import Takeovers
from cronlog.domain.partition_layout import PartitionLayout

log = logging.getLogger(__name__)

# Seconds of catching up per owner cycle while partitions are being taken: the partitions
# already owned fire in between.
CATCH_UP_PER_CYCLE = 0.25


class Ownership:
    def __init__(self, owner_id: str, transport: OwnerTransport, store: OwnerStore,
                 replay: LogReplay, forget: Callable[[set[int]], None],
                 adopt: Callable[[Sequence[int], datetime], None],
                 monotonic: Callable[[], float] = time.monotonic,
                 metrics: OwnerMetrics | None = None,
                 layout: PartitionLayout | None = None,
                 fence: DepartedOwnerFence | None = None) -> None:
        """`forget` drops what the other collaborators know of logical partitions; `adopt`
        has them load caught-up logical partitions' runs in flight. layout: None is the
        identity (each Kafka partition its own logical partition, whatever their count).
        fence: ends the open transactions of departed earlier owners at a takeover (None:
        the transaction coordinator's timeout does)."""
        self._owner_id = owner_id
        self._transport = transport
        self._store = store
        self._forget_elsewhere = forget
        self._adopt = adopt
        self._monotonic = monotonic
        self._metrics = metrics or NoOwnerMetrics()
        self._takeovers = Takeovers(replay, monotonic)
        self._layout = layout
        self._fence = fence
        # Caught-up Kafka partitions at their anchor's epoch: what fences the cycle's apply
        # (the anchor's epoch changes whenever any of the partition's does) and what tells
        # an inbox message of an owned partition.
        self.epochs: dict[int, int] = {}
        # The logical partitions of those: what the store is asked about.
        self._owned: set[int] = set()
        # The claims of every logical partition of the Kafka partitions catching up, told
        # to the store once each has caught up (readiness looks at every logical one).
        self._claims: dict[int, list[Claim]] = {}

    @property
    def owned(self) -> frozenset[int]:
        """The logical partitions of the caught-up Kafka partitions."""
        return frozenset(self._owned)

    def logicals(self, kafka: Collection[int]) -> list[int]:
        if self._layout is None:
            return sorted(set(kafka))
        return self._layout.logicals_of_all(kafka)

    @property
    def catching_up(self) -> bool:
        return bool(self._takeovers)

    def take(self, partitions: Sequence[int], now: datetime) -> None:
        """partitions: Kafka partitions the group assigned."""
        began = self._monotonic()
        self.forget(partitions)
        # Their inbox waits until they have caught up: nothing of theirs is decided, or
        # committed as consumed, before.
        self._transport.hold(partitions)
        # Every partition at once: one Postgres round trip for the epochs of all their
        # logical partitions, one reader of the log for the catch-up.
        claims = {c.partition: c
                  for c in self._store.take_epochs(self.logicals(partitions), self._owner_id)}
        for kafka in partitions:
            self._claims[kafka] = [claims[lo] for lo in self.logicals([kafka])]
        self._metrics.partitions_claimed(len(partitions))
        self._fence_departed(claims.values())
        # The replay reads Kafka partitions: each from its anchor's offsets (the anchor's
        # row holds the Kafka partition's, docs/partitions.md).
        self._takeovers.start([claims[self._anchor(k)] for k in partitions], since=began)
        # Those with little to replay are owned at once; the others catch up over the next
        # cycles, a while each, so the partitions already owned keep firing.
        self.catch_up(now)

    def _fence_departed(self, claims: Collection[Claim]) -> None:
        """Before the catch-up reads the log: an earlier owner that died mid-transaction
        holds back the partitions' last stable offset, and every reader behind it, until its
        transaction ends (infra/kafka/departed_owners.py)."""
        earlier = {c.previous_owner for c in claims
                   if c.previous_owner and c.previous_owner != self._owner_id}
        if self._fence is not None and earlier:
            self._fence.fence_departed(sorted(earlier))

    def catch_up(self, now: datetime) -> None:
        """Applies more of the claimed partitions' log; those caught up are this owner's
        from now on. Bounded per cycle, so the partitions already owned keep firing."""
        for caught_up in self._takeovers.advance(CATCH_UP_PER_CYCLE):
            anchors = caught_up.claims
            # The anchor of Kafka partition k is logical partition k.
            partitions = [c.partition for c in anchors]
            logicals = self.logicals(partitions)
            self._adopt(logicals, now)
            for claim in anchors:
                self.epochs[claim.partition] = claim.epoch
            self._owned.update(logicals)
            # Told only now: the api answers "ready" when every partition's group member
            # has caught up (nothing answers ready before it is).
            self._store.caught_up([c for k in partitions for c in self._claims.pop(k, [])],
                                  self._transport.group_member)
            self._transport.release(partitions)
            self._metrics.caught_up(len(partitions), caught_up.seconds)
            log.info("owner %s took partitions %s at epochs %s in %.2fs", self._owner_id,
                     partitions, sorted({c.epoch for c in anchors}), caught_up.seconds)

    def forget(self, partitions: Collection[int]) -> None:
        """Drops Kafka partitions no longer this owner's, or taken anew."""
        gone = set(partitions)
        self._takeovers.drop({self._anchor(k) for k in gone})
        for partition in gone:
            self.epochs.pop(partition, None)
            self._claims.pop(partition, None)
        logicals = set(self.logicals(gone))
        self._owned -= logicals
        self._forget_elsewhere(logicals)

    def lose_all(self) -> None:
        """Fenced for good: nothing is this owner's any more."""
        self._takeovers.clear()
        self.epochs.clear()
        self._owned.clear()
        self._claims.clear()

    def _anchor(self, kafka: int) -> int:
        return kafka if self._layout is None else self._layout.anchor(kafka)
