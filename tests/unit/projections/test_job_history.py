from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.projections.job_history import (
    DependencyEventRow,
    JobHistoryProjector,
    JobHistoryRow,
    MissedFireTimesRow,
    MissingJob,
)
from cronlog.projections.job_timeline import JobEventRow

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Store:
    rows: dict[str, JobHistoryRow] = field(default_factory=dict)
    job_events: list[JobEventRow] = field(default_factory=list)

    def write_job_rows(self, rows: Sequence[JobHistoryRow]) -> None:
        for row in rows:
            if row.job_id not in self.rows or self.rows[row.job_id].version <= row.version:
                self.rows[row.job_id] = row

    def write_job_events(self, rows: Sequence[JobEventRow]) -> None:
        self.job_events.extend(rows)

    def latest_job_rows(self, job_ids: Sequence[str]) -> dict[str, JobHistoryRow]:
        return {j: self.rows[j] for j in job_ids if j in self.rows}

    def write_missed_fire_times(self, rows: Sequence[MissedFireTimesRow]) -> None:
        raise AssertionError("these tests record no missed fire times")

    def write_dependency_events(self, rows: Sequence[DependencyEventRow]) -> None:
        raise AssertionError("these tests record no dependency events")


def test_lifecycle_events_keep_one_row_per_job_and_redelivery_changes_nothing() -> None:
    spec = JobSpec(name="n", tenant="t", queue="q", handler="h", cron="0 * * * *",
                   labels={"team": "data"})
    job = Job.create(uuid4(), spec, "r1", T0)
    job.fire(T0 + timedelta(hours=1))
    job.pause("r2", T0 + timedelta(hours=2))
    events = [event_to_record(e) for e in job.collect_events()]
    store = Store()
    JobHistoryProjector(store).apply_batch(events[:1])
    JobHistoryProjector(store).apply_batch(events)  # a restart that sees the first again
    row = store.rows[str(job.id)]
    assert row.status == "paused" and row.version == 3 and row.cron == "0 * * * *"
    assert row.label_keys == ("team",) and row.label_values == ("data",)
    with pytest.raises(MissingJob):
        JobHistoryProjector(Store()).apply_batch(events[2:])


def test_an_interval_job_keeps_its_kind_and_interval_and_other_kinds_have_none() -> None:
    interval = Job.create(uuid4(), JobSpec(name="n", tenant="t", queue="q", handler="h",
                                           every=timedelta(minutes=90), start_at=T0), "r1", T0)
    cron = Job.create(uuid4(), JobSpec(name="n", tenant="t", queue="q", handler="h",
                                       cron="0 * * * *"), "r2", T0)
    one_off = Job.create(uuid4(), JobSpec(name="n", tenant="t", queue="q", handler="h",
                                          at=T0 + timedelta(days=1)), "r3", T0)
    interval.pause("r4", T0 + timedelta(hours=1))
    store = Store()
    JobHistoryProjector(store).apply_batch(
        [event_to_record(e) for job in (interval, cron, one_off) for e in job.collect_events()])
    rows = {job_id: (r.schedule_kind, r.cron, r.every_ms) for job_id, r in store.rows.items()}
    assert rows == {str(interval.id): ("every", "", 5_400_000),
                    str(cron.id): ("cron", "0 * * * *", 0),
                    str(one_off.id): ("at", "", 0)}
    assert store.rows[str(interval.id)].status == "paused", "status events keep the schedule"
