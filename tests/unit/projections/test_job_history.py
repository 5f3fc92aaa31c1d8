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
    JobHistoryProjector,
    JobHistoryRow,
    MissedFireTimesRow,
    MissingJob,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Store:
    rows: dict[str, JobHistoryRow] = field(default_factory=dict)

    def write_job_rows(self, rows: Sequence[JobHistoryRow]) -> None:
        for row in rows:
            if row.job_id not in self.rows or self.rows[row.job_id].version <= row.version:
                self.rows[row.job_id] = row

    def latest_job_rows(self, job_ids: Sequence[str]) -> dict[str, JobHistoryRow]:
        return {j: self.rows[j] for j in job_ids if j in self.rows}

    def write_missed_fire_times(self, rows: Sequence[MissedFireTimesRow]) -> None:
        raise AssertionError("these tests record no missed fire times")


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
