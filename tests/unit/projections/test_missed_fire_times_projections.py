"""A missed range (JobFireTimesMissed) through every reader of the log: the Avro mapping,
the Postgres state, the ClickHouse history rows, the audit timeline and the job as of any
instant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from cronlog.domain.job import Job
from cronlog.domain.policies import MisfirePolicy
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import event_to_record, record_to_event
from cronlog.projections.audit import job_as_of, timeline
from cronlog.projections.job_history import (
    DependencyEventRow,
    JobHistoryProjector,
    JobHistoryRow,
    MissedFireTimesRow,
)
from cronlog.projections.job_timeline import JobEventRow
from cronlog.projections.state import apply_job_event
from tests.support.state_writer import NoWrites

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RESUMED = T0 + timedelta(days=1, seconds=30)
SPEC = JobSpec(name="n", tenant="acme", queue="q", handler="h", cron="* * * * * *",
               time_zone="Europe/Berlin", misfire_policy=MisfirePolicy.SKIP)


def paused_a_day() -> list[tuple[str, dict[str, Any]]]:
    """Every job event of an every-second job paused for a day, through the codec."""
    job = Job.create(uuid4(), SPEC, "r1", T0)
    job.pause("r2", T0)
    job.resume("r3", RESUMED)
    job.fire_due(RESUMED, RESUMED, timedelta(seconds=60))
    codec = AvroCodec()
    return [codec.decode(codec.encode(*event_to_record(e))) for e in job.collect_events()]


def the_range(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    ranges = [r for n, r in events if n == "JobFireTimesMissed"]
    assert len(ranges) == 1
    return ranges[0]


def test_the_range_round_trips_through_avro_with_its_fields() -> None:
    record = the_range(paused_a_day())
    assert record["tenant"] == "acme"
    assert record["first"] == T0 + timedelta(seconds=1)
    # Everything more than the 60 s catch-up window late: 00:00:01 to 23:59:29.
    assert record["last"] == RESUMED - timedelta(seconds=61)
    assert record["count"] == 86_400 + 30 - 61
    assert record["next_fire_at"] == record["last"] + timedelta(seconds=1)
    assert "misfire policy skip" in record["reason"]


@dataclass
class Writer(NoWrites):
    changes: list[dict[str, Any]] = field(default_factory=list)

    def update_job(self, job_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        self.changes.append({"version": version, **changes})

    def record_request(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a range carries no request id")


def test_postgres_state_moves_the_job_past_the_range_and_creates_no_runs() -> None:
    record = the_range(paused_a_day())
    writer = Writer()
    apply_job_event(writer, 0, "JobFireTimesMissed", record, b"raw")
    assert writer.changes == [{"version": record["version"],
                               "next_fire_at": record["next_fire_at"],
                               "last_fired_at": record["last"]}]


@dataclass
class Store:
    missed: list[MissedFireTimesRow] = field(default_factory=list)
    jobs: dict[str, JobHistoryRow] = field(default_factory=dict)
    job_events: list[JobEventRow] = field(default_factory=list)

    def write_job_rows(self, rows: Sequence[JobHistoryRow]) -> None:
        self.jobs.update({r.job_id: r for r in rows})

    def write_job_events(self, rows: Sequence[JobEventRow]) -> None:
        self.job_events.extend(rows)

    def latest_job_rows(self, job_ids: Sequence[str]) -> dict[str, JobHistoryRow]:
        return {j: self.jobs[j] for j in job_ids if j in self.jobs}

    def write_missed_fire_times(self, rows: Sequence[MissedFireTimesRow]) -> None:
        self.missed.extend(rows)

    def write_dependency_events(self, rows: Sequence[DependencyEventRow]) -> None:
        raise AssertionError("a range has no dependency events")


def test_history_writes_one_row_per_range_the_same_on_redelivery() -> None:
    events = paused_a_day()
    record = the_range(events)
    store = Store()
    JobHistoryProjector(store).apply_batch(events)
    JobHistoryProjector(store).apply_batch(events[-3:])  # redelivered after a restart
    assert len(set(store.missed)) == 1, "the same row again, which the store collapses"
    row = store.missed[0]
    assert (row.tenant, row.job_id, row.count) == ("acme", str(record["job_id"]),
                                                   record["count"])
    assert row.first_us == int((T0 + timedelta(seconds=1)).timestamp() * 1_000_000)
    assert row.version == record["version"]
    # The range does not disturb the job's own row.
    assert store.jobs[row.job_id].status == "active"


def test_the_timeline_shows_the_range_and_the_job_rebuilds_past_it() -> None:
    events = paused_a_day()
    record = the_range(events)
    entries = [e for e in timeline(events) if e.event == "JobFireTimesMissed"]
    assert len(entries) == 1
    assert entries[0].actor == "owner (schedule)"
    assert f"count={record['count']}" in entries[0].details
    assert f"first={record['first'].isoformat()}" in entries[0].details
    assert f"last={record['last'].isoformat()}" in entries[0].details
    up_to_range = [(n, r) for n, r in events if r["version"] <= record["version"]]
    job = job_as_of(up_to_range, RESUMED, record_to_event)
    assert job.version == record["version"]
    assert job.last_fired_at == record["last"]
    assert job.next_fire_at == record["next_fire_at"]
