"""Invariant 5 in bounded work: overdue fire times are recorded as ranges (first, last, count)
that, with the runs, cover exactly the schedule's fire times — whatever the zone, DST
change, policy or length of the pause — in a number of events and schedule evaluations that
does not grow with the number of fire times missed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cronlog.domain.job import Job
from cronlog.domain.missed_fire_times import MAX_RANGE_SPAN, count_fire_times
from cronlog.domain.policies import MisfirePolicy, OverlapPolicy
from cronlog.domain.schedule import CronSchedule, Schedule
from cronlog.domain.spec import JobSpec
from tests.support.examples import examples

NOW = datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)
WINDOW = timedelta(seconds=60)


@dataclass(frozen=True)
class Missed:
    first: datetime
    last: datetime
    count: int


@dataclass
class Outcome:
    job: Job
    ranges: list[Missed]
    run_times: list[datetime]
    job_events: list[str]
    cycles: int


def spec(cron: str, zone: str = "UTC", policy: MisfirePolicy = MisfirePolicy.SKIP,
         overlap: OverlapPolicy = OverlapPolicy.ALLOW, **extra: Any) -> JobSpec:
    return JobSpec(name="n", tenant="acme", queue="q", handler="h", cron=cron, time_zone=zone,
                   misfire_policy=policy, overlap_policy=overlap, **extra)


def resume_after(job_spec: JobSpec, created: datetime, resumed: datetime,
                 window: timedelta = WINDOW, limit: int = 1000,
                 horizon: timedelta = timedelta(0)) -> Outcome:
    """Creates and pauses the job, resumes it later and runs owner cycles until it has
    nothing more due; collects what they recorded."""
    job = Job.create(uuid4(), job_spec, "create", created)
    job.pause("pause", created)
    job.resume("resume", resumed)
    job.collect_events()
    outcome = Outcome(job, [], [], [], 0)
    while (job.status == "active" and job.next_fire_at is not None
           and job.next_fire_at <= resumed + horizon):
        outcome.cycles += 1
        assert outcome.cycles < 100, "no progress"
        runs = job.fire_due(resumed, resumed + horizon, window, limit=limit)
        outcome.run_times += [r.scheduled_at for r in runs]
        for event in job.collect_events():
            name = type(event).__name__
            outcome.job_events.append(name)
            if name == "JobFireTimesMissed":
                outcome.ranges.append(Missed(event.first, event.last, event.count))  # type: ignore[attr-defined]
    return outcome


class TooMany(Exception):
    """More fire times than a check can afford to step through."""


def stepped(schedule: Schedule, after: datetime, until: datetime, cap: int) -> list[datetime]:
    times: list[datetime] = []
    cursor = schedule.next_fire_after(after)
    while cursor is not None and cursor <= until:
        times.append(cursor)
        if len(times) > cap:
            raise TooMany
        cursor = schedule.next_fire_after(cursor)
    return times


def assert_exact_cover(outcome: Outcome, created: datetime, cap: int = 50_000) -> None:
    """Ranges and runs together are exactly the schedule's fire times up to the last one
    handled: each once, none left out, every count exact."""
    job = outcome.job
    handled_until = job.last_fired_at
    if handled_until is None:
        assert not outcome.ranges and not outcome.run_times
        return
    expected = stepped(job.schedule, created, handled_until, cap)
    covered: list[datetime] = list(outcome.run_times)
    for missed in outcome.ranges:
        inside = [t for t in expected if missed.first <= t <= missed.last]
        assert inside and inside[0] == missed.first and inside[-1] == missed.last
        assert len(inside) == missed.count, f"count of {missed}"
        covered += inside
    assert sorted(covered) == expected, "ranges and runs cover every fire time exactly once"


def test_a_days_pause_of_an_every_second_job_is_one_range_not_86400_events() -> None:
    outcome = resume_after(spec("* * * * * *"), NOW, NOW + timedelta(days=1))
    assert outcome.job_events.count("JobFireTimesMissed") == 1
    # The minute inside the catch-up window runs (60 fire times); the day before is one
    # event.
    assert len(outcome.run_times) == 60
    assert len(outcome.job_events) == 61
    assert outcome.ranges[0].count == 86_400 - 60
    assert_exact_cover(outcome, NOW, cap=100_000)


def test_schedule_evaluations_do_not_grow_with_the_fire_times_missed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    original = CronSchedule.next_fire_after

    def counting(self: CronSchedule, after: datetime) -> datetime | None:
        nonlocal calls
        calls += 1
        return original(self, after)

    monkeypatch.setattr(CronSchedule, "next_fire_after", counting)
    used = {}
    for days in (1, 30, 90):
        calls = 0
        # No catch-up window: nothing runs, all the work is the range.
        outcome = resume_after(spec("* * * * * *", "Europe/Berlin"), NOW,
                               NOW + timedelta(days=days), window=timedelta(0))
        assert outcome.job_events == ["JobFireTimesMissed"]
        assert outcome.ranges[0].count == days * 86_400
        used[days] = calls
    assert max(used.values()) < 200, used


def test_a_pause_longer_than_a_range_is_recorded_over_successive_cycles() -> None:
    resumed = NOW + timedelta(days=200)
    outcome = resume_after(spec("17 * * * *", "America/New_York"), NOW, resumed)
    assert outcome.job_events.count("JobFireTimesMissed") == 3
    assert outcome.cycles == 3
    assert all(r.last - r.first <= MAX_RANGE_SPAN for r in outcome.ranges)
    assert_exact_cover(outcome, NOW)


@pytest.mark.parametrize(("policy", "ranges", "runs"), [
    (MisfirePolicy.RUN_ALL, 0, 5), (MisfirePolicy.RUN_LATEST, 1, 2),
    (MisfirePolicy.SKIP, 1, 1)])
def test_misfire_policies(policy: MisfirePolicy, ranges: int, runs: int) -> None:
    resumed = NOW + timedelta(minutes=5, seconds=30)
    outcome = resume_after(spec("* * * * *", policy=policy), NOW, resumed,
                           horizon=timedelta(seconds=2))
    assert len(outcome.ranges) == ranges
    assert len(outcome.run_times) == runs
    assert_exact_cover(outcome, NOW)
    if policy == MisfirePolicy.RUN_LATEST:
        # 12:04 is the latest fire time more than a minute late: it runs, 12:01-12:03 not.
        assert outcome.ranges == [Missed(NOW.replace(minute=1, second=0, microsecond=0),
                                         NOW.replace(minute=3, second=0, microsecond=0), 3)]
        assert [t.minute for t in outcome.run_times] == [4, 5]
    if policy == MisfirePolicy.SKIP:
        assert outcome.ranges[0].count == 4


def test_run_latest_with_a_single_overdue_fire_time_runs_it_and_records_nothing() -> None:
    outcome = resume_after(spec("0 * * * *", policy=MisfirePolicy.RUN_LATEST),
                           NOW, NOW + timedelta(minutes=65))
    assert outcome.ranges == []
    assert [t.hour for t in outcome.run_times] == [13]


def test_run_all_still_runs_every_fire_time_bounded_per_call() -> None:
    outcome = resume_after(spec("* * * * *", policy=MisfirePolicy.RUN_ALL), NOW,
                           NOW + timedelta(hours=2), limit=50)
    assert outcome.ranges == [] and len(outcome.run_times) == 120
    assert outcome.cycles == 3


def test_a_range_that_reaches_the_end_of_the_schedule_completes_the_job() -> None:
    end = NOW + timedelta(hours=3)
    outcome = resume_after(spec("*/5 * * * *", end_at=end), NOW, NOW + timedelta(days=2))
    assert outcome.job.status == "completed" and outcome.job.next_fire_at is None
    assert outcome.job_events == ["JobFireTimesMissed", "JobCompleted"]
    assert outcome.ranges[0].count == 36
    assert_exact_cover(outcome, NOW)


@pytest.mark.parametrize(("cron", "zone", "created", "expected"), [
    # Spring forward in Berlin: 02:30 does not exist and fires once at 03:00 local.
    ("30 2 * * *", "Europe/Berlin", datetime(2026, 3, 27, tzinfo=UTC), 5),
    # Fall back in New York: a fixed 01:30 fires once.
    ("30 1 * * *", "America/New_York", datetime(2026, 10, 30, tzinfo=UTC), 5),
    # Elapsed time: every half hour of real time, through both repeated hours (New York's
    # 25-hour day) and past the missing one (Berlin's 23-hour day).
    ("*/30 * * * *", "America/New_York", datetime(2026, 10, 31, tzinfo=UTC), 5 * 48),
    ("*/30 * * * *", "Europe/Berlin", datetime(2026, 3, 28, tzinfo=UTC), 5 * 48),
    # Lord Howe moves by 30 minutes: the local clock covers 119.5 hours in 120.
    ("15,45 2 * * *", "Australia/Lord_Howe", datetime(2026, 4, 2, tzinfo=UTC), 10),
    ("0 0 * * * *", "Australia/Lord_Howe", datetime(2026, 4, 2, tzinfo=UTC), 119),
])
def test_dst_changes_inside_a_range(cron: str, zone: str, created: datetime,
                                    expected: int) -> None:
    resumed = created + timedelta(days=5, seconds=30)
    outcome = resume_after(spec(cron, zone), created, resumed, window=timedelta(0))
    assert_exact_cover(outcome, created)
    assert sum(r.count for r in outcome.ranges) == expected


cron_fields = st.fixed_dictionaries({
    "second": st.sampled_from(["", "0 ", "*/20 ", "5,35 ", "* "]),
    "minute": st.sampled_from(["0", "30", "*/15", "5,45", "*", "0-59"]),
    "hour": st.sampled_from(["*", "2", "1", "*/2", "0-23/3", "1,2,3", "0-23"]),
    "dom": st.sampled_from(["*", "1", "15", "*/2", "L"]),
    "dow": st.sampled_from(["*", "0", "1-5"]),
})
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata",
         "America/Santiago"]
DST_CHANGES = [datetime(2026, 3, 8, 6, 59, tzinfo=UTC), datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
               datetime(2026, 3, 29, 0, 59, tzinfo=UTC), datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
               datetime(2026, 4, 4, 14, 45, tzinfo=UTC), datetime(2026, 10, 3, 15, 29, tzinfo=UTC)]
created_at = st.one_of(
    st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2030, 1, 1),
                 timezones=st.just(UTC)),
    st.sampled_from(DST_CHANGES).flatmap(
        lambda t: st.integers(-3 * 86400, 86400).map(lambda s: t + timedelta(seconds=s))))


def _pauses() -> Iterator[st.SearchStrategy[timedelta]]:
    yield st.integers(0, 3 * 3600).map(lambda s: timedelta(seconds=s))
    yield st.integers(0, 6 * 86400).map(lambda s: timedelta(seconds=s))
    yield st.integers(0, 400).map(lambda d: timedelta(days=d, seconds=7))


@settings(max_examples=examples(100), deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(cron_fields, st.sampled_from(ZONES), created_at, st.one_of(*_pauses()),
       st.sampled_from(list(MisfirePolicy)),
       st.sampled_from([timedelta(0), timedelta(seconds=1), timedelta(seconds=90),
                        timedelta(hours=2)]))
def test_ranges_and_runs_cover_exactly_the_schedules_fire_times(
        f: dict[str, str], zone: str, created: datetime, pause: timedelta,
        policy: MisfirePolicy, window: timedelta) -> None:
    cron = f"{f['second']}{f['minute']} {f['hour']} {f['dom']} * {f['dow']}"
    job_spec = spec(cron, zone, policy)
    try:
        job_spec.schedule()
    except ValueError:
        assume(False)
    # The check steps through every fire time: keep that affordable.
    probe = Job.create(uuid4(), job_spec, "probe", created)
    try:
        stepped(probe.schedule, created, created + pause, 20_000)
    except TooMany:
        assume(False)
    outcome = resume_after(job_spec, created, created + pause, window=window, limit=200)
    assert_exact_cover(outcome, created, cap=20_000)
    # Nothing overdue is left: the next fire time is not earlier than the resume.
    assert outcome.job.next_fire_at is None or outcome.job.next_fire_at > created + pause


@settings(max_examples=examples(150), deadline=None)
@given(cron_fields, st.sampled_from(ZONES), created_at,
       st.integers(1, 3 * 86400).map(lambda s: timedelta(seconds=s)))
def test_counting_agrees_with_stepping(f: dict[str, str], zone: str, start: datetime,
                                       span: timedelta) -> None:
    cron = f"{f['second']}{f['minute']} {f['hour']} {f['dom']} * {f['dow']}"
    try:
        schedule = CronSchedule.parse(cron, zone)
    except ValueError:
        assume(False)
    try:
        expected = stepped(schedule, start - timedelta(microseconds=1), start + span, 30_000)
    except TooMany:
        assume(False)
    expected = [t for t in expected if t < start + span]
    assert count_fire_times(schedule, start, start + span, 1_000_000) == len(expected)
