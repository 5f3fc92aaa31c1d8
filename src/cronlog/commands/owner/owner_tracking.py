"""What the owner's collaborators follow of its partitions across cycles (attempts
running, runs in flight, held runs, waiting dependents, calendar followers): adopted from
Postgres when a partition has caught up, forgotten when it is lost, and moved on by what
each cycle committed. They know each run and job by its logical partition."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from cronlog.commands.owner.attempt_tracking import AttemptTracking
from cronlog.commands.owner.calendar_followers import CalendarFollowers
from cronlog.commands.owner.dependencies import Dependencies
from cronlog.commands.owner.firing import Firing
from cronlog.commands.owner.owner_cycle import Cycle, RunCache
from cronlog.commands.owner.ports import OwnerStore, Produced, Topics
from cronlog.commands.owner.set_aside import JobsSetAside
from cronlog.domain.ids import as_uuid
from cronlog.domain.partition_layout import PartitionLayout


class OwnerTracking:
    def __init__(self, store: OwnerStore, topics: Topics, layout: PartitionLayout | None,
                 run_cache: RunCache, set_aside: JobsSetAside, attempts: AttemptTracking,
                 firing: Firing, dependencies: Dependencies,
                 followers: CalendarFollowers) -> None:
        self._store = store
        self._topics = topics
        self._layout = layout
        self._run_cache = run_cache
        self._set_aside = set_aside
        self._attempts = attempts
        self._firing = firing
        self._dependencies = dependencies
        self._followers = followers

    def forget(self, partitions: set[int]) -> None:
        self._attempts.forget(partitions)
        self._firing.forget(partitions)
        self._dependencies.forget(partitions)

    def adopt(self, partitions: Sequence[int], now: datetime) -> None:
        """Loads the runs in flight of partitions just caught up, for the collaborators."""
        # One read for every partition taken, and each job once: a partition's in-flight
        # runs are often many runs of few jobs.
        in_flight = self._store.in_flight_runs(sorted(partitions)) if partitions else []
        needed = {run.job_id for _, run in in_flight
                  if run.attempt_status in ("dispatched", "running")}
        jobs = {job.id: job for job in self._store.load_jobs(sorted(needed))} if needed else {}
        for partition, run in in_flight:
            self._firing.track_in_flight(partition, run)
            self._attempts.track_in_flight(partition, run, jobs.get(run.job_id), now)
        self._dependencies.adopt(sorted(partitions))
        self._followers.adopt(sorted(partitions))

    def committed(self, produced: Sequence[Produced], now: datetime, cycle: Cycle) -> None:
        """Follows what the cycle committed: running attempts, runs in flight, held runs."""
        produced = self._logical_view(produced)
        partition_of: dict[UUID, int] = {}
        for p in produced:
            if p.topic != self._topics.run_events:
                if (p.topic == self._topics.job_events and self._set_aside
                        and "job_id" in p.record):  # not a calendar's event (issue 20)
                    # A command changed the job: it gets another chance.
                    self._set_aside.discard(as_uuid(p.record["job_id"]))
                continue
            partition_of[as_uuid(p.record["job_id"])] = p.partition
            self._attempts.committed(p, now, cycle)
        self._attempts.cycle_committed(cycle)
        self._dependencies.committed(produced, cycle)
        self._run_cache.remember(list(cycle.runs.values()))
        self._firing.cycle_committed(cycle, partition_of)

    def _logical_view(self, produced: Sequence[Produced]) -> Sequence[Produced]:
        """What the cycle committed, each at its logical partition rather than the Kafka
        partition it was written to (the same with the identity layout: nothing hashed)."""
        layout = self._layout
        if layout is None or layout.is_identity:
            return produced
        # Only the events are tracked by partition; replies, dispatches and alerts keep
        # theirs (nothing hashed for them).
        events = (self._topics.job_events, self._topics.run_events)
        return [p._replace(partition=layout.logical_of_message(p.partition, p.key))
                if p.topic in events else p for p in produced]
