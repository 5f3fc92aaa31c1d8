"""What an owner reads of a calendar's followers by reference (issue 33, item 2) against a
real PostgreSQL: the calendar's row without its subscribers, the jobs of the partitions it
still owns, and the jobs behind their calendar's row, after a takeover (all of them) and in
the sweep (only calendars applied recently, by the database's clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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


def test_the_followers_behind_their_calendars_row_are_found(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    store = OwnerStoreAdapter(state, AvroCodec())
    claims = {p: state.take_epoch(p, "o") for p in (0, 1, 2)}
    name = f"hol-{uuid4().hex[:8]}"
    calendar = Calendar.create("t", name, "", days("2026-12-25"), "c1", T0)
    state.apply(1, claims[1].epoch, calendar_logged(calendar, 0), [])

    spec = JobSpec(name="report", tenant="t", queue="q", handler="echo", cron="0 9 * * *",
                   calendar=name)
    at_1 = AppliedCalendar(name, 1, True, days("2026-12-25"))
    following, elsewhere, not_found = uuid4(), uuid4(), uuid4()
    offsets = {0: 0, 2: 0}
    for job_id, partition, applied in ((following, 0, at_1), (elsewhere, 2, at_1),
                                       (not_found, 0, AppliedCalendar(name, 0, False))):
        job = Job.create(job_id, spec, f"r-{job_id}", T0, applied)
        jobs, runs = logged(list(job.collect_events()), first_offset=offsets[partition])
        offsets[partition] += len(jobs)
        state.apply(partition, claims[partition].epoch, jobs, runs)
    subscribed = [record("CalendarJobSubscribed", {"calendar_id": calendar.id, "version": 1,
                                                   "at": T0, "job_id": job_id}, 10 + n)
                  for n, job_id in enumerate((following, elsewhere))]
    state.apply(1, claims[1].epoch, subscribed, [])
    assert store.stale_followers([0, 1, 2]) == []

    calendar.update("", days("2026-12-24..2026-12-26"), "c2", T0)
    state.apply(1, claims[1].epoch, calendar_logged(calendar, 20), [])
    assert store.published_calendar(calendar.id) == AppliedCalendar(
        name, 2, True, days("2026-12-24..2026-12-26"))
    assert store.published_calendar(uuid4()) is None
    assert store.calendar_versions([calendar.id, uuid4()]) == {calendar.id: 2}

    # After a takeover: every job of the partitions behind its calendar's row, but the one
    # told "not found" (not a subscriber).
    assert store.stale_followers([0]) == [(following, calendar.id, 2)]
    assert sorted(store.stale_followers([0, 2])) == sorted(
        [(following, calendar.id, 2), (elsewhere, calendar.id, 2)])
    # The sweep: calendars applied within the window only.
    assert store.stale_followers([0], timedelta(minutes=2)) == [(following, calendar.id, 2)]
    with psycopg.connect(isolated.postgres_dsn) as conn:
        conn.execute("UPDATE calendars SET applied_at = now() - interval '1 hour' "
                     "WHERE calendar_id = %s", (calendar.id,))
    assert store.stale_followers([0], timedelta(minutes=2)) == []
    assert store.stale_followers([0]) == [(following, calendar.id, 2)]

    # Only the jobs of the partitions asked for, loaded whole.
    loaded = store.following_jobs([following, elsewhere, uuid4()], [0])
    assert [j.id for j in loaded] == [following]
    assert loaded[0].calendar == at_1 and loaded[0].spec.calendar == name
    assert store.following_jobs([], [0]) == []
