"""AttemptTimers: when something must happen to each attempt of the owner's partitions.

The owner keeps two: the start deadlines (an attempt dispatched but not started within the
start timeout of its time — a queue nobody serves, a worker that crashed holding it — is
lost and retried per the job's policy, DESIGN invariant 6) and the waiting attempts (due
later than the lookahead: dispatched once their time is within it).

Kept in memory like the heartbeat deadlines, rebuilt from Postgres on takeover. A heap
orders them by due time, so a cycle looks only at the ones that are due; an attempt that
starts or ends is forgotten in O(1) and its heap entry skipped when it surfaces.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple
from uuid import UUID


class AttemptTimer(NamedTuple):
    run_id: UUID
    attempt: int
    partition: int
    due: datetime


class AttemptTimers:
    def __init__(self) -> None:
        self._current: dict[UUID, AttemptTimer] = {}
        self._heap: list[tuple[datetime, int, UUID]] = []
        # Due but not yet settled: a cycle that is decided again (or not committed) must
        # see them again, so they leave only when the attempt starts or ends.
        self._overdue: dict[UUID, AttemptTimer] = {}

    def __len__(self) -> int:
        return len(self._current)

    def expect(self, run_id: UUID, attempt: int, partition: int, due: datetime) -> None:
        """Something is due for attempt `attempt` of the run at `due` (its start deadline,
        or its dispatch); replaces what the run had."""
        timer = AttemptTimer(run_id, attempt, partition, due)
        self._current[run_id] = timer
        self._overdue.pop(run_id, None)
        heapq.heappush(self._heap, (due, attempt, run_id))
        if len(self._heap) > 2 * len(self._current) + 1024:
            # Most attempts start long before their start deadline: without this the heap
            # would hold every dispatch of the last start timeout (a million at 3,500/s).
            self._heap = [(d.due, d.attempt, d.run_id) for d in self._current.values()]
            heapq.heapify(self._heap)

    def settled(self, run_id: UUID) -> None:
        """Nothing is due for the run any more (its attempt started, was dispatched or
        ended)."""
        self._current.pop(run_id, None)
        self._overdue.pop(run_id, None)

    def overdue(self, now: datetime) -> list[AttemptTimer]:
        """The attempts whose time has come by `now` and that are not settled (as far as this
        owner has seen), oldest first; they stay overdue until settled, so a cycle decided
        again, or not committed, sees them again."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, attempt, run_id = heapq.heappop(heap)
            current = self._current.get(run_id)
            if current is not None and current.attempt == attempt:
                self._overdue[run_id] = current
        return sorted(self._overdue.values(), key=lambda d: d.due)

    def drop_partitions(self, partitions: Iterable[int]) -> None:
        gone = set(partitions)
        for run_id in [r for r, d in self._current.items() if d.partition in gone]:
            self.settled(run_id)
        if not self._current:
            self._heap.clear()
