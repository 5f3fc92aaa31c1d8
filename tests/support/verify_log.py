"""A small event log made by the real domain, for verify's tests: jobs fired, their runs
started and ended, each event in the record form the log holds; and ways to corrupt it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from cronlog.domain.job import Job
from cronlog.domain.policies import RetryPolicy
from cronlog.domain.run import Run
from cronlog.infra.avro.event_mapping import event_to_record, record_to_event
from cronlog.verification.verifier import Verification, verify
from cronlog.verification.window import Window

Record = dict[str, Any]


@dataclass
class EventLog:
    job_events: dict[str, list[tuple[str, Record]]] = field(
        default_factory=lambda: defaultdict(list))
    run_events: dict[str, list[tuple[str, Record]]] = field(
        default_factory=lambda: defaultdict(list))

    def take(self, job: Job, *runs: Run) -> None:
        """What the aggregates did since they were last taken, into the log."""
        self.job_events[str(job.id)] += [event_to_record(e) for e in job.collect_events()]
        for run in runs:
            self.run_events[str(run.job_id)] += [event_to_record(e)
                                                 for e in run.collect_events()]

    def fire_and_run(self, job: Job, until: datetime, worker: str = "w1") -> list[Run]:
        """Fires the job up to `until`, each fire time at its time, each run started and
        succeeded then."""
        runs: list[Run] = []
        while job.next_fire_at is not None and job.next_fire_at <= until:
            due = job.next_fire_at
            runs += job.fire_due(due, due, timedelta(minutes=10))
        for run in runs:
            if run.attempt:
                at = run.scheduled_at + timedelta(seconds=1)
                run.start(run.attempt, worker, at, at)
                run.succeed(run.attempt, worker, at, b"", False, at)
        self.take(job, *runs)
        return runs

    def fail_every_attempt(self, run: Run, policy: RetryPolicy) -> None:
        at = run.scheduled_at
        while run.status not in ("dead_lettered", "failed") and run.attempt:
            at += timedelta(seconds=30)
            run.start(run.attempt, "w1", at, at)
            run.fail(run.attempt, "w1", at, "boom", b"", False, at, policy,
                     timedelta(minutes=1), 0.5)
        self.take_run(run)

    def take_run(self, run: Run) -> None:
        self.run_events[str(run.job_id)] += [event_to_record(e)
                                             for e in run.collect_events()]

    def of_job(self, job_id: UUID | str) -> list[tuple[str, Record]]:
        return self.job_events[str(job_id)]

    def runs_of(self, job_id: UUID | str) -> list[tuple[str, Record]]:
        return self.run_events[str(job_id)]

    def verify(self, since: datetime, until: datetime, settled_before: datetime,
               tenant: str | None = None) -> Verification:
        return verify(self.job_events, self.run_events, Window(since, until),
                      settled_before, record_to_event, tenant)


def named(events: list[tuple[str, Record]], name: str) -> list[tuple[int, Record]]:
    """The (index, record) of each event of that name."""
    return [(i, r) for i, (n, r) in enumerate(events) if n == name]


def with_fields(record: Mapping[str, Any], **fields: Any) -> Record:
    return {**record, **fields}
