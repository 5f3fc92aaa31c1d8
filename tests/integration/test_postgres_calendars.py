"""The calendar part of the Postgres projection against a real PostgreSQL (issue 20): the
calendars table the api reads, the subscribers its owner publishes to, a job's applied
calendar read back with the job (so a due job is fired with its exclusions), a replay that
never takes a calendar back, and a request id taken on the calendar."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from cronlog.domain.calendar import Calendar
from cronlog.domain.exclusions import AppliedCalendar, Exclusions
from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.owner_adapters import OwnerStoreAdapter
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from tests.support.logged_events import calendar_logged, logged, record

pytestmark = pytest.mark.integration
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


def days(*texts: str) -> Exclusions:
    return Exclusions.parse(texts, "exclusions")


def calendar_row(dsn: str, tenant: str, name: str) -> tuple[Any, ...] | None:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT version, description, exclusions, subscribers, partition FROM calendars "
            "WHERE tenant = %s AND name = %s", (tenant, name)).fetchone()


def test_calendars_and_subscribers_are_kept_and_never_go_back(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    store = OwnerStoreAdapter(state, AvroCodec())
    claim = state.take_epoch(1, "o")
    calendar = Calendar.create("t", f"hol-{uuid4().hex[:8]}", "public holidays",
                               days("2026-12-24..2026-12-26", "2027-01-01"), "c1", T0)
    created = calendar_logged(calendar, 0)
    job_id = uuid4()
    subscribed = record("CalendarJobSubscribed", {"calendar_id": calendar.id, "version": 1,
                                                  "at": T0, "job_id": job_id}, 1)
    state.apply(1, claim.epoch, [*created, subscribed], [])
    assert calendar_row(isolated.postgres_dsn, "t", calendar.name) == (
        1, "public holidays", ["2026-12-24..2026-12-26", "2027-01-01"], 1, 1)
    loaded = store.calendar(calendar.id)
    assert loaded is not None and loaded.version == 1 and loaded.subscribers == {job_id}
    assert loaded.exclusions == calendar.exclusions and loaded.tenant == "t"

    calendar.update("", days("2026-12-25"), "c2", T0)
    updated = calendar_logged(calendar, 2)
    state.apply(1, claim.epoch, updated, [])
    # A catch-up applying the creation again leaves the newer version.
    state.apply(1, claim.epoch, created, [])
    assert calendar_row(isolated.postgres_dsn, "t", calendar.name) == (
        2, "", ["2026-12-25"], 1, 1)
    unsubscribed = record("CalendarJobUnsubscribed", {"calendar_id": calendar.id,
                                                      "version": 2, "at": T0,
                                                      "job_id": job_id}, 3)
    state.apply(1, claim.epoch, [unsubscribed], [])
    again = store.calendar(calendar.id)
    assert again is not None and again.subscribers == frozenset() and again.version == 2
    assert calendar_row(isolated.postgres_dsn, "t", calendar.name)[3] == 0  # type: ignore[index]


def test_a_jobs_applied_calendar_is_read_back_with_the_job(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    store = OwnerStoreAdapter(state, AvroCodec())
    claim = state.take_epoch(0, "o")
    spec = JobSpec(name="report", tenant="t", queue="q", handler="echo", cron="0 9 * * *",
                   calendar="holidays", exclusions=days("2026-01-02"))
    job = Job.create(uuid4(), spec, "j1", T0,
                     AppliedCalendar("holidays", 2, True, days("2026-01-03")))
    jobs, runs = logged(list(job.collect_events()))
    state.apply(0, claim.epoch, jobs, runs)
    row = state.job(job.id)
    assert row is not None and row.calendar == AppliedCalendar("holidays", 2, True,
                                                               days("2026-01-03"))
    loaded = store.job(job.id)
    assert loaded is not None and loaded.calendar == row.calendar
    assert loaded.spec.exclusions == days("2026-01-02")
    # Its schedule is the spec's without both: the next day after is the 4th.
    assert loaded.schedule.next_fire_after(T0) == datetime(2026, 1, 4, 9, tzinfo=UTC)

    job.update(replace(spec, calendar=None), "j2", T0)
    jobs, runs = logged(list(job.collect_events()), first_offset=10)
    state.apply(0, claim.epoch, jobs, runs)
    dropped = state.job(job.id)
    assert dropped is not None and dropped.calendar is None
    assert dropped.next_fire_at == datetime(2026, 1, 3, 9, tzinfo=UTC)


def test_a_calendar_commands_request_id_is_taken_on_the_calendar(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    claim = state.take_epoch(2, "o")
    calendar_id = uuid4()
    applied = record("JobRequestApplied", {
        "job_id": calendar_id, "version": 1, "at": T0, "request_id": "c1",
        "command": "CreateCalendar", "request_digest": "d" * 64}, 0)
    state.apply(2, claim.epoch, [applied], [])
    stored = state.request(calendar_id, "c1")
    assert stored is not None and stored.command == "CreateCalendar"
    assert stored.job_version == 1 and state.job(calendar_id) is None
