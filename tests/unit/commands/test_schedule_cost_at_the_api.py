"""Invariant 12 at the api (issue 33): CreateJob, UpdateJob and CreateJobs refuse a schedule
whose next fire time the search could not find within its bound, with the calendar as it is
now, naming the field and the bound, before anything is sent."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from uuid import UUID

import pytest

from cronlog.commands.api.job_batch import BatchItem, JobBatch, OneByOne
from cronlog.domain import schedule_search
from cronlog.domain.errors import ScheduleTooCostly
from cronlog.domain.exclusions import Exclusions
from cronlog.domain.schedule import CronSchedule
from cronlog.domain.spec import JobSpec
from tests.support.api_ports import (
    Calendars,
    CreatedJobs,
    RecordingBus,
    job_api,
    view,
)

WEEKDAYS = [f"{date(2026, 12, 7) + timedelta(days=7 * n)}.."
            f"{date(2026, 12, 11) + timedelta(days=7 * n)}" for n in range(50)]
SPEC = JobSpec(name="n", tenant="acme", queue="default", handler="echo",
               cron="*/5 2 * * 1-5", time_zone="America/New_York", calendar="weekdays")


class NoneExist:
    def existing(self, job_ids: object) -> set[UUID]:
        return set()


def test_a_search_past_the_bound_with_the_calendar_is_refused_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    bus, calendars = RecordingBus(), Calendars()
    calendars.add(view("acme", "weekdays", 3, *WEEKDAYS))
    CronSchedule.parse(SPEC.cron or "", SPEC.time_zone)  # accepted (and remembered) first
    monkeypatch.setattr(schedule_search, "MOST_DAYS", 0)
    api = job_api(bus, calendars, CreatedJobs())
    calls: tuple[Callable[[], object], ...] = (
        lambda: job_api(bus, calendars).create_job("r-1", SPEC),
        lambda: api.update_job("r-2", UUID(int=7), 1, SPEC))
    for call in calls:
        with pytest.raises(ScheduleTooCostly) as refused:
            call()
        assert refused.value.field == "spec.calendar"
        assert "day steps" in refused.value.message
    [outcome] = JobBatch(job_api(bus, calendars), OneByOne(bus), NoneExist()).create_jobs(
        [BatchItem("r-3", SPEC)])
    assert isinstance(outcome, ScheduleTooCostly) and outcome.field == "spec.calendar"
    assert bus.sent == []


def test_an_expression_that_waits_past_the_horizon_is_refused_before_it_is_sent() -> None:
    bus = RecordingBus()
    spec = JobSpec(name="n", tenant="acme", queue="default", handler="echo",
                   cron="0 0 * 2 0#5", exclusions=Exclusions())
    with pytest.raises(ScheduleTooCostly) as refused:
        job_api(bus, Calendars()).create_job("r-1", spec)
    assert refused.value.field == "spec.schedule.cron"
    assert bus.sent == []
