"""StartDeadlines: every dispatched attempt must start within a start timeout of its time.

A dispatch that no worker takes (a queue nobody serves, a worker that crashed holding it)
would otherwise stay SCHEDULED for ever and hold its tenant's in-flight slots. The owner
loses such an attempt and retries it per the job's policy (DESIGN invariant 6).

Kept in memory like the heartbeat deadlines, rebuilt from Postgres on takeover. A heap
orders them by due time, so a cycle looks only at the ones that are due; an attempt that
starts or ends is forgotten in O(1) and its heap entry skipped when it surfaces.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID


@dataclass(frozen=True)
class StartDeadline:
    run_id: UUID
    attempt: int
    partition: int
    due: datetime


class StartDeadlines:
    def __init__(self) -> None:
        self._current: dict[UUID, StartDeadline] = {}
        self._heap: list[tuple[datetime, int, UUID]] = []
        # Due but not yet settled: a cycle that is decided again (or not committed) must
        # see them again, so they leave only when the attempt starts or ends.
        self._overdue: dict[UUID, StartDeadline] = {}

    def __len__(self) -> int:
        return len(self._current)

    def expect(self, run_id: UUID, attempt: int, partition: int, due: datetime) -> None:
        """Attempt `attempt` of the run was dispatched: it must start by `due`."""
        deadline = StartDeadline(run_id, attempt, partition, due)
        self._current[run_id] = deadline
        self._overdue.pop(run_id, None)
        heapq.heappush(self._heap, (due, attempt, run_id))
        if len(self._heap) > 2 * len(self._current) + 1024:
            # Most attempts start long before their deadline: without this the heap would
            # hold every dispatch of the last start timeout (a million at 3,500 runs/s).
            self._heap = [(d.due, d.attempt, d.run_id) for d in self._current.values()]
            heapq.heapify(self._heap)

    def settled(self, run_id: UUID) -> None:
        """The run's attempt started or ended: no start deadline any more."""
        self._current.pop(run_id, None)
        self._overdue.pop(run_id, None)

    def overdue(self, now: datetime) -> list[StartDeadline]:
        """The attempts that should have started by now and have not (as far as this owner
        has seen), oldest first; they stay overdue until settled."""
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
