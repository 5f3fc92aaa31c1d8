"""The Calendar aggregate and a job following one (issue 20): versions, refusals, bounded
subscribers, and the job's next fire time as calendar versions are applied."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.domain.calendar import MAX_SUBSCRIBERS, Calendar, CalendarFull
from cronlog.domain.errors import InvalidSpec, StaleVersion
from cronlog.domain.exclusions import AppliedCalendar, Exclusions, calendar_id
from cronlog.domain.job import Job
from cronlog.domain.job_status import COMPLETED
from cronlog.domain.spec import JobSpec, validate_spec

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
DAILY = JobSpec(name="report", tenant="t", queue="q", handler="echo", cron="0 9 * * *",
                time_zone="Europe/Berlin", calendar="holidays")


def days(*texts: str) -> Exclusions:
    return Exclusions.parse(texts, "exclusions")


def test_a_calendar_counts_versions_by_what_it_excludes_not_by_who_follows() -> None:
    calendar = Calendar.create("t", "holidays", "", days("2026-12-25"), "r1", NOW)
    assert calendar.id == calendar_id("t", "holidays") and calendar.version == 1
    assert calendar.subscribe(job := uuid4()) and not calendar.subscribe(job)
    assert calendar.version == 1
    calendar.update("public", days("2026-12-26"), "r2", NOW, expected_version=1)
    assert calendar.version == 2 and calendar.exclusions.texts() == ["2026-12-26"]
    with pytest.raises(StaleVersion):
        calendar.update("", Exclusions(), "r3", NOW, expected_version=1)
    assert [type(e).__name__ for e in calendar.collect_events()] == [
        "CalendarCreated", "CalendarUpdated"]
    assert calendar.unsubscribe(job) and not calendar.unsubscribe(job)


def test_bad_calendars_are_refused_naming_the_field() -> None:
    for tenant, name, description, field in (("t", "a b", "", "name"),
                                             ("t/x", "ok", "", "tenant"),
                                             ("t", "ok", "x" * 1001, "description")):
        with pytest.raises(InvalidSpec) as refused:
            Calendar.create(tenant, name, description, Exclusions(), None, NOW)
        assert refused.value.field == field


def test_a_calendar_has_at_most_so_many_subscribers() -> None:
    calendar = Calendar.create("t", "holidays", "", Exclusions(), None, NOW)
    calendar.subscribers = frozenset(uuid4() for _ in range(MAX_SUBSCRIBERS))
    with pytest.raises(CalendarFull):
        calendar.subscribe(uuid4())


def test_a_dependent_job_cannot_name_exclusions_or_a_calendar() -> None:
    from cronlog.domain.dependency import Dependency

    after = JobSpec(name="n", tenant="t", queue="q", handler="h",
                    after=Dependency((uuid4(),)))
    for spec, field in ((replace(after, calendar="holidays"), "spec.calendar"),
                        (replace(after, exclusions=days("2026-01-01")), "spec.exclusions")):
        with pytest.raises(InvalidSpec) as refused:
            validate_spec(spec)
        assert refused.value.field == field
    with pytest.raises(InvalidSpec, match=r"spec\.calendar"):
        validate_spec(replace(DAILY, calendar="no spaces"))


def test_a_job_applies_only_newer_versions_and_searches_its_next_fire_time_again() -> None:
    job = Job.create(uuid4(), DAILY, "r1", NOW,
                     AppliedCalendar("holidays", 3, True, days("2026-01-02")))
    assert job.next_fire_at == datetime(2026, 1, 3, 8, tzinfo=UTC)
    assert not job.apply_calendar(AppliedCalendar("holidays", 3, True, Exclusions()), None,
                                  NOW)
    assert not job.apply_calendar(AppliedCalendar("other", 9, True, Exclusions()), None, NOW)
    assert job.apply_calendar(AppliedCalendar("holidays", 4, True, days("2026-01-03")), None,
                              NOW)
    assert job.next_fire_at == datetime(2026, 1, 2, 8, tzinfo=UTC)


def test_a_due_fire_time_newly_excluded_is_not_run_and_one_that_is_not_stays_due() -> None:
    job = Job.create(uuid4(), DAILY, "r1", NOW - timedelta(days=1))
    assert job.next_fire_at == datetime(2026, 1, 1, 8, tzinfo=UTC)  # due, overdue
    job.apply_calendar(AppliedCalendar("holidays", 1, True, days("2025-12-30")), None, NOW)
    assert job.next_fire_at == datetime(2026, 1, 1, 8, tzinfo=UTC)
    job.apply_calendar(AppliedCalendar("holidays", 2, True, days("2026-01-01")), None, NOW)
    assert job.next_fire_at == datetime(2026, 1, 2, 8, tzinfo=UTC)


def test_a_calendar_not_found_changes_no_fire_time() -> None:
    job = Job.create(uuid4(), DAILY, "r1", NOW)
    assert job.calendar == AppliedCalendar("holidays", 0, False)
    assert job.next_fire_at == datetime(2026, 1, 2, 8, tzinfo=UTC)


def test_inline_and_calendar_exclusions_both_apply_and_an_update_can_drop_the_calendar() -> None:
    spec = replace(DAILY, exclusions=days("2026-01-02"))
    job = Job.create(uuid4(), spec, "r1", NOW,
                     AppliedCalendar("holidays", 1, True, days("2026-01-03")))
    assert job.next_fire_at == datetime(2026, 1, 4, 8, tzinfo=UTC)
    job.update(replace(spec, calendar=None), "r2", NOW)
    assert job.calendar is None and job.next_fire_at == datetime(2026, 1, 3, 8, tzinfo=UTC)


def test_a_one_off_job_on_an_excluded_day_never_fires() -> None:
    spec = JobSpec(name="n", tenant="t", queue="q", handler="h",
                   at=datetime(2026, 1, 2, 9, tzinfo=UTC), exclusions=days("2026-01-02"))
    assert Job.create(uuid4(), spec, "r1", NOW).status == COMPLETED
