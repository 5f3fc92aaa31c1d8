"""InFlightRuns: an owner's unfinished runs, with a per-tenant count kept as they change.

The tenants' in-flight limits are checked every cycle; counting the runs afresh each time
cost an owner time in proportion to its runs in flight, which grow exactly when it falls
behind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from uuid import UUID


@dataclass(frozen=True)
class InFlight:
    tenant: str
    partition: int
    job_id: UUID


class InFlightRuns:
    def __init__(self) -> None:
        self._runs: dict[UUID, InFlight] = {}
        self._by_tenant: Counter[str] = Counter()

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def __len__(self) -> int:
        return len(self._runs)

    def by_tenant(self) -> Counter[str]:
        """A copy of the counts, for a cycle to adjust with its own changes."""
        return Counter(self._by_tenant)

    def put(self, run_id: UUID, tenant: str, partition: int, job_id: UUID) -> None:
        old = self._runs.get(run_id)
        if old is not None:
            self._uncount(old.tenant)
        self._runs[run_id] = InFlight(tenant, partition, job_id)
        self._by_tenant[tenant] += 1

    def discard(self, run_id: UUID) -> None:
        old = self._runs.pop(run_id, None)
        if old is not None:
            self._uncount(old.tenant)

    def drop_partitions(self, partitions: Collection[int]) -> None:
        for run_id in [r for r, f in self._runs.items() if f.partition in partitions]:
            self.discard(run_id)

    def a_job_of(self, tenant: str) -> UUID | None:
        return next((f.job_id for f in self._runs.values() if f.tenant == tenant), None)

    def _uncount(self, tenant: str) -> None:
        self._by_tenant[tenant] -= 1
        if self._by_tenant[tenant] <= 0:
            del self._by_tenant[tenant]
