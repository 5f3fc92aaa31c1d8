"""InFlightRuns: an owner's unfinished runs, and how many of each tenant's occupy capacity at
a given moment (the tenants' in-flight limits, docs/lifecycle.md "Tenant limits").

A run occupies capacity while it runs, and from a window (IN_FLIGHT_WINDOW, or the lookahead
when shorter) before its attempt's time until it starts: then it is a dispatch a worker is
about to start. Not the whole lookahead: that is as long as a scheduler's failover takes
(8 s by default), and an every-second job would hold eight runs against its tenant's limit. A run
created a minute ahead (the sparse lookahead) or waiting for its retry's backoff does not
occupy anything yet, so it does not count until its time is near; counting every
unfinished run made a tenant's every-minute jobs, each with its next run enqueued a minute
ahead, fill the limit with runs that were nowhere near a worker.

The counts are kept as the runs change, in order statistics per tenant: counting afresh
each cycle cost an owner time in proportion to its runs in flight, which grow exactly when
it falls behind. A question costs O(log n).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple
from uuid import UUID

from sortedcontainers import SortedList

from cronlog.domain.run import Run
from cronlog.domain.run_states import RUNNING

# How long before its time a dispatched run counts as in flight.
IN_FLIGHT_WINDOW = timedelta(seconds=2)


class InFlight(NamedTuple):
    tenant: str
    partition: int
    job_id: UUID
    # When the run's current attempt is due (epoch seconds); None while it runs.
    due: float | None


def in_flight(run: Run, partition: int) -> InFlight:
    return InFlight(run.tenant, partition, run.job_id,
                    None if run.status == RUNNING else run.not_before.timestamp())


@dataclass
class _Tenant:
    running: int = 0
    due: SortedList = field(default_factory=SortedList)

    def add(self, entry: InFlight, sign: int = 1) -> None:
        if entry.due is None:
            self.running += sign
        elif sign > 0:
            self.due.add(entry.due)
        else:
            self.due.remove(entry.due)

    def __bool__(self) -> bool:
        return bool(self.running or self.due)

    def occupying(self, now_edge: float, at: float, window: float) -> int:
        """Running, due by now_edge (late or about to start now), or due within the window
        around `at`."""
        count: int = self.running + self.due.bisect_right(now_edge)
        low = max(now_edge, at - window)
        high = at + window
        if high > low:
            count += self.due.bisect_right(high) - self.due.bisect_right(low)
        return count


class InFlightRuns:
    def __init__(self, window: timedelta) -> None:
        self._window = window.total_seconds()
        self._runs: dict[UUID, InFlight] = {}
        self._tenants: dict[str, _Tenant] = {}
        # Unfinished runs by tenant, whatever their time: the scheduler's in-flight gauge.
        self._by_tenant: Counter[str] = Counter()

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def __len__(self) -> int:
        return len(self._runs)

    def get(self, run_id: UUID) -> InFlight | None:
        return self._runs.get(run_id)

    def by_tenant(self) -> Counter[str]:
        """A copy of the unfinished runs' counts; safe to take from another thread."""
        return Counter(self._by_tenant)

    def put(self, run_id: UUID, entry: InFlight) -> None:
        self.discard(run_id)
        self._runs[run_id] = entry
        self._tenants.setdefault(entry.tenant, _Tenant()).add(entry)
        self._by_tenant[entry.tenant] += 1

    def discard(self, run_id: UUID) -> None:
        old = self._runs.pop(run_id, None)
        if old is None:
            return
        tenant = self._tenants[old.tenant]
        tenant.add(old, -1)
        if not tenant:
            del self._tenants[old.tenant]
        self._by_tenant[old.tenant] -= 1
        if self._by_tenant[old.tenant] <= 0:
            del self._by_tenant[old.tenant]

    def drop_partitions(self, partitions: Collection[int]) -> None:
        for run_id in [r for r, f in self._runs.items() if f.partition in partitions]:
            self.discard(run_id)

    def tenants(self) -> list[str]:
        return list(self._tenants)

    def a_job_of(self, tenant: str) -> UUID | None:
        return next((f.job_id for f in self._runs.values() if f.tenant == tenant), None)

    def occupying(self, tenant: str, now: datetime, at: datetime) -> int:
        """The tenant's runs that occupy capacity at `at` (not before now), as far as known
        now: those running, those due by now plus the window, and those due within the
        window around `at`."""
        found = self._tenants.get(tenant)
        if found is None:
            return 0
        edge = now.timestamp() + self._window
        return found.occupying(edge, max(at.timestamp(), now.timestamp()), self._window)


class CycleOccupancy:
    """The in-flight runs as a cycle sees them: the committed ones, with the cycle's own
    changes (runs created, started, ended or re-dispatched, not committed yet) laid over."""

    def __init__(self, base: InFlightRuns, window: timedelta) -> None:
        self._base = base
        self._window = window.total_seconds()
        self._added: dict[str, _Tenant] = {}
        self._removed: dict[str, _Tenant] = {}
        # The cycle's version of each run it changed, None once it has ended.
        self._cycle: dict[UUID, InFlight | None] = {}

    def update(self, run: Run, partition: int = -1) -> None:
        """Takes the run as it stands in the cycle; again after it changed."""
        if run.id in self._cycle:
            previous = self._cycle[run.id]
            if previous is not None:
                self._added[previous.tenant].add(previous, -1)
        else:
            old = self._base.get(run.id)
            if old is not None:
                self._removed.setdefault(old.tenant, _Tenant()).add(old)
        entry = None if run.finished else in_flight(run, partition)
        self._cycle[run.id] = entry
        if entry is not None:
            self._added.setdefault(entry.tenant, _Tenant()).add(entry)

    def occupying(self, tenant: str, now: datetime, at: datetime) -> int:
        count = self._base.occupying(tenant, now, at)
        edge = now.timestamp() + self._window
        moment = max(at.timestamp(), now.timestamp())
        if (added := self._added.get(tenant)) is not None:
            count += added.occupying(edge, moment, self._window)
        if (removed := self._removed.get(tenant)) is not None:
            count -= removed.occupying(edge, moment, self._window)
        return count
