"""Invariant 12 for schedules (issue 33): every accepted schedule finds its next fire time
within the search's bound of steps, and the compiled search gives exactly the fire times of
the reference search (tests/unit/domain/reference_search.py) it replaced."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cronlog.domain import schedule_search
from cronlog.domain.cron import parse_cron
from cronlog.domain.errors import InvalidSpec, ScheduleTooCostly
from cronlog.domain.exclusions import (
    MAX_EXCLUSION_RANGES,
    AppliedCalendar,
    DateRange,
    ExcludingSchedule,
    Exclusions,
)
from cronlog.domain.job import Job
from cronlog.domain.schedule import CronSchedule, IntervalSchedule
from cronlog.domain.spec import JobSpec, check_search_cost, validate_spec
from tests.support.examples import examples
from tests.unit.domain.reference_search import reference

# Zones with DST at 02:00, at midnight (Santiago, Havana, Tehran), by 30 minutes (Lord
# Howe), at 02:45 (Chatham), a skipped day (Apia) and changes a week apart (Gaza).
ZONES = ("UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Chatham",
         "America/Santiago", "America/Havana", "Asia/Tehran", "Pacific/Apia", "Asia/Gaza")


def _term(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    return st.one_of(
        value.map(str),
        st.tuples(value, value).map(lambda p: f"{min(p)}-{max(p)}"),
        st.tuples(value, st.integers(1, high)).map(lambda p: f"{p[0]}-{high}/{p[1]}"),
        st.integers(1, high).map(lambda n: f"*/{n}"),
    )


def _field(low: int, high: int, extra: st.SearchStrategy[str] | None = None,
           star: bool = True) -> st.SearchStrategy[str]:
    term = _term(low, high) if extra is None else st.one_of(_term(low, high), extra)
    listed = st.lists(term, min_size=1, max_size=4).map(",".join)
    return st.one_of(st.just("*"), listed) if star else listed


DOM_QUARTZ = st.one_of(st.just("L"), st.just("LW"), st.integers(1, 31).map(lambda d: f"{d}W"))
DOW_QUARTZ = st.one_of(st.integers(0, 7).map(lambda d: f"{d}L"),
                       st.tuples(st.integers(0, 7), st.integers(1, 5)).map(
                           lambda p: f"{p[0]}#{p[1]}"))
expressions = st.builds(
    lambda seconds, minute, hour, dom, month, dow: " ".join(
        ([seconds] if seconds is not None else []) + [minute, hour, dom, month, dow]),
    st.one_of(st.none(), _field(0, 59)), _field(0, 59), _field(0, 23),
    _field(1, 31, DOM_QUARTZ), _field(1, 12), _field(0, 7, DOW_QUARTZ))
# Every day of the expression's day fields matters: 1W..31W and 5#5 make the issue's bomb.
bombs = st.sampled_from([
    "0 0 " + ",".join(f"{d}W" for d in range(1, 32)) + " * */7,5#5",
    "*/5 2 * * *", "* * 2 * * *", "30 2 * 3 0#2", "0 0 L 2 *", "59 23 31 12 *",
    "0 0 29 2 1#5", "0 12 * * 1-6"])


@st.composite
def exclusion_sets(draw: st.DrawFn) -> Exclusions:
    """Up to MAX_EXCLUSION_RANGES ranges: a regular train (every k days from a start, each
    a few days long, as a calendar of holidays or the issue's Fridays) and a few at random."""
    ranges: list[DateRange] = []
    if draw(st.booleans()):
        first = date(draw(st.integers(2000, 2060)), 1, 1) + timedelta(days=draw(
            st.integers(0, 364)))
        every = draw(st.integers(1, 40))
        length = draw(st.integers(0, max(0, every - 2)))
        count = draw(st.integers(1, MAX_EXCLUSION_RANGES - 10))
        for n in range(count):
            start = first + timedelta(days=n * every)
            end = start + timedelta(days=length)
            if end > date(2099, 12, 31):
                break
            ranges.append(DateRange(start, end))
    for _ in range(draw(st.integers(0, 8))):
        start = date(2000, 1, 1) + timedelta(days=draw(st.integers(0, 36500)))
        end = min(start + timedelta(days=draw(st.sampled_from([0, 1, 6, 30, 400]))),
                  date(2099, 12, 31))
        ranges.append(DateRange(start, end))
    return Exclusions(tuple(ranges))


instants = st.datetimes(min_value=datetime(1999, 1, 1), max_value=datetime(2099, 6, 1)).map(
    lambda t: t.replace(tzinfo=UTC))


class CountingBudget(schedule_search.SearchBudget):
    most_days = 0
    most_years = 0

    def day(self) -> None:
        super().day()
        CountingBudget.most_days = max(CountingBudget.most_days, self.days)

    def year(self) -> None:
        super().year()
        CountingBudget.most_years = max(CountingBudget.most_years, self.years)


def _accepted(expression: str, zone: str, exclusions: Exclusions, calendar_days: Exclusions,
              start: datetime | None, end: datetime | None) -> JobSpec | None:
    spec = JobSpec(name="n", tenant="t", queue="q", handler="h", cron=expression,
                   time_zone=zone, exclusions=exclusions, start_at=start, end_at=end,
                   calendar="holidays" if calendar_days else None)
    try:
        spec = validate_spec(spec)
        check_search_cost(spec, calendar_days)
    except InvalidSpec:
        return None
    return spec


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(expressions, bombs), st.sampled_from(ZONES), exclusion_sets(),
       exclusion_sets(), st.lists(instants, min_size=1, max_size=3),
       st.one_of(st.none(), instants), st.one_of(st.none(), instants))
def test_every_accepted_schedule_finds_its_next_fire_time_within_the_bound(
        expression: str, zone: str, exclusions: Exclusions,
        calendar_days: Exclusions, afters: list[datetime], start: datetime | None,
        end: datetime | None) -> None:
    if start is not None and end is not None and end <= start:
        end = None
    spec = _accepted(expression, zone, exclusions, calendar_days.normalised(), start, end)
    assume(spec is not None)
    assert spec is not None
    schedule = spec.schedule(calendar_days.normalised())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schedule_search, "SearchBudget", CountingBudget)
        for after in afters:
            cursor: datetime | None = after
            for _ in range(3):  # a few successive fire times, as an owner fires them
                assert cursor is not None
                cursor = schedule.next_fire_after(cursor)  # ScheduleTooCostly past it
                if cursor is None:
                    break
    assert CountingBudget.most_days <= schedule_search.MOST_DAYS
    assert CountingBudget.most_years <= schedule_search.MOST_YEAR_STEPS


# Intervals from a second to a year, and the adversary's: a whole number of days, which a
# train of excluded days every k days meets on excluded day after excluded day.
intervals = st.one_of(st.integers(1, 366 * 86_400).map(lambda s: timedelta(seconds=s)),
                      st.integers(1, 40).map(lambda d: timedelta(days=d)))


@st.composite
def aligned_trains(draw: st.DrawFn) -> tuple[timedelta, Exclusions, datetime]:
    """The adversary's case: a grid of whole days from its start_at and a train of excluded
    days on its fire times' dates (every other one, or each), for up to the most ranges."""
    days = draw(st.integers(1, 40))
    start = draw(instants)
    skip = draw(st.sampled_from([1, 2]))
    first = start.date()
    count = draw(st.integers(MOST_DAYS_STEPS, MAX_EXCLUSION_RANGES))
    ranges = [DateRange(first + timedelta(days=days * skip * n),
                        first + timedelta(days=days * skip * n)) for n in range(count)
              if first + timedelta(days=days * skip * n) <= date(2099, 12, 31)]
    return timedelta(days=days), Exclusions(tuple(ranges)), start


MOST_DAYS_STEPS = schedule_search.MOST_DAYS
random_intervals = st.tuples(intervals, exclusion_sets(), st.one_of(st.none(), instants))


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(random_intervals, aligned_trains()), st.sampled_from(ZONES + ("UTC",) * 5),
       exclusion_sets(), st.lists(instants, min_size=1, max_size=3),
       st.one_of(st.none(), instants))
def test_every_accepted_interval_finds_its_next_fire_time_within_the_bound(
        case: tuple[timedelta, Exclusions, datetime | None], zone: str,
        calendar_days: Exclusions, afters: list[datetime], end: datetime | None) -> None:
    every, exclusions, start = case
    """An interval's search steps once per excluded range its grid meets: within the same
    bound as a cron expression's, or ScheduleTooCostly (the door refuses it; an owner sets
    the job aside), never a step per range of the 2,000 a job and its calendar may have."""
    if start is not None and end is not None and end <= start:
        end = None
    normal = calendar_days.normalised()
    spec = JobSpec(name="n", tenant="t", queue="q", handler="h", every=every, time_zone=zone,
                   exclusions=exclusions, start_at=start, end_at=end,
                   calendar="holidays" if normal else None)
    try:
        spec = validate_spec(spec)
        check_search_cost(spec, normal)
    except InvalidSpec:
        assume(False)
        return
    schedule = spec.schedule(normal)
    grid_searches = 0
    grid_search = IntervalSchedule.next_fire_after

    def counted(self: IntervalSchedule, after: datetime) -> datetime | None:
        nonlocal grid_searches
        grid_searches += 1
        return grid_search(self, after)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IntervalSchedule, "next_fire_after", counted)
        for after in afters:
            cursor: datetime | None = after
            for _ in range(3):
                assert cursor is not None
                grid_searches = 0
                try:
                    cursor = schedule.next_fire_after(cursor)
                except ScheduleTooCostly:
                    break  # later in the job's life than the door looked: set aside
                finally:
                    assert grid_searches <= schedule_search.MOST_DAYS + 1
                if cursor is None:
                    break


def test_an_interval_on_excluded_day_after_excluded_day_is_refused_at_the_door() -> None:
    every_other_day = Exclusions(tuple(
        DateRange(date(2027, 1, 1) + timedelta(days=2 * n), date(2027, 1, 1) +
                  timedelta(days=2 * n)) for n in range(MAX_EXCLUSION_RANGES)))
    spec = JobSpec(name="n", tenant="t", queue="q", handler="h", every=timedelta(days=2),
                   exclusions=every_other_day, start_at=datetime(2027, 1, 1, 12, tzinfo=UTC))
    with pytest.raises(ScheduleTooCostly) as refused:
        validate_spec(spec)
    assert refused.value.field == "spec.exclusions"
    # A grid that misses them is accepted, and its next fire time is the first day after.
    fine = validate_spec(JobSpec(name="n", tenant="t", queue="q", handler="h",
                                 every=timedelta(days=1), exclusions=every_other_day,
                                 start_at=datetime(2027, 1, 1, 12, tzinfo=UTC)))
    assert fine.schedule().next_fire_after(datetime(2027, 1, 1, tzinfo=UTC)) == \
        datetime(2027, 1, 2, 12, tzinfo=UTC)


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(expressions, bombs), st.sampled_from(ZONES), exclusion_sets(),
       instants, st.one_of(st.none(), instants), st.one_of(st.none(), instants),
       st.integers(-60 * 3600, 60 * 3600))
def test_the_compiled_search_gives_the_reference_fire_times(
        expression: str, zone: str, exclusions: Exclusions, after: datetime,
        start: datetime | None, end: datetime | None, near_change: int) -> None:
    try:
        schedule = CronSchedule.parse(expression, zone)
    except InvalidSpec:
        assume(False)
        return
    plan = schedule.plan
    changes = [c for c in plan.zone.changes if 946_684_800 < c < 4_000_000_000]
    if changes and near_change % 2:  # half of the cursors within 60 hours of a change
        change = changes[near_change % len(changes)]
        after = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=change + near_change)
    if start is not None and end is not None and end <= start:
        end = None
    normal = exclusions.normalised()
    ours = ExcludingSchedule(JobSpec(name="n", tenant="t", queue="q", handler="h",
                                     cron=expression, time_zone=zone, start_at=start,
                                     end_at=end)._bounded(), normal, ZoneInfo(zone)) \
        if normal else JobSpec(name="n", tenant="t", queue="q", handler="h", cron=expression,
                               time_zone=zone, start_at=start, end_at=end)._bounded()
    theirs = reference(expression, zone, normal, start, end)
    # The reference walks up to 8 years a search: a bounded horizon of a few fire times.
    cursor: datetime | None = after
    for _ in range(3):
        assert cursor is not None
        try:
            expected = theirs.next_fire_after(cursor)
        except OverflowError:
            return
        try:
            found = ours.next_fire_after(cursor)
        except ScheduleTooCostly:
            # Only a schedule the door refuses may hit the bound.
            assert not plan.admitted or normal
            return
        assert found == expected, (expression, zone, cursor)
        if found is None:
            break
        cursor = found


@settings(max_examples=examples(200), deadline=None)
@given(st.builds(lambda dom, dow: f"0 0 {dom} * {dow}", _field(1, 31, DOM_QUARTZ),
                 _field(0, 7, DOW_QUARTZ)),
       st.integers(1970, 2099), st.integers(1, 12))
def test_a_month_mask_is_the_days_the_rule_matches(expression: str, year: int,
                                                   month: int) -> None:
    rule = parse_cron(expression).days
    length = calendar.monthrange(year, month)[1]
    first = (date(year, month, 1).weekday() + 1) % 7
    expected = sum(1 << (d - 1) for d in range(1, length + 1)
                   if rule.matches(date(year, month, d)))
    assert rule.month_mask(length, first) == expected


FRIDAYS_29_TO_31 = Exclusions(tuple(
    DateRange(d, d) for d in (date(2026, 1, 1) + timedelta(days=n) for n in range(27000))
    if d <= date(2099, 12, 31) and d.weekday() == 4 and d.day >= 29)).normalised()
BOMB = "0 0 " + ",".join(f"{d}W" for d in range(1, 32)) + " * */7,5#5"


def test_the_issue_bomb_is_searched_within_the_bound() -> None:
    # Issue 33: a calendar of the Fridays on the 29th-31st up to 2099 and a job that fires on
    # exactly those days: it never fires again, found in a bounded number of steps.
    assert len(FRIDAYS_29_TO_31.ranges) >= 300
    schedule = ExcludingSchedule(CronSchedule.parse(BOMB, "America/New_York"),
                                 FRIDAYS_29_TO_31, ZoneInfo("America/New_York"))
    assert schedule.next_fire_after(datetime(2026, 1, 5, tzinfo=UTC)) is None
    job = Job.create(job_id=__import__("uuid").UUID(int=1), spec=JobSpec(
        name="n", tenant="t", queue="q", handler="h", cron=BOMB, time_zone="America/New_York",
        calendar="fridays"), request_id="r", at=datetime(2026, 1, 5, tzinfo=UTC),
        calendar=AppliedCalendar("fridays", 1, True, FRIDAYS_29_TO_31))
    assert job.next_fire_at is None  # completed at once, as before, without the 0.35 s


def test_an_expression_that_waits_past_the_horizon_is_refused_naming_field_and_bound() -> None:
    # The fifth Sunday of February is 29 February on a Sunday: 1976, 2004, 2032, ... 28 years
    # apart, so a search from 2005 would give up after 8 years.
    with pytest.raises(ScheduleTooCostly) as refused:
        validate_spec(JobSpec(name="n", tenant="t", queue="q", handler="h",
                              cron="0 0 * 2 0#5"))
    assert refused.value.field == "spec.schedule.cron"
    assert "8 years" in refused.value.message and "64 day steps" in refused.value.message
    # A stored job of it still computes, within the bound: 2032 is within 8 years of 2026.
    stored = CronSchedule.parse("0 0 * 2 0#5", "UTC")
    assert stored.next_fire_after(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(
        2032, 2, 29, tzinfo=UTC)


def test_a_refused_expression_is_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    from cronlog.domain import schedule as schedule_module
    from cronlog.domain.cron import parse_cron as original
    calls: list[str] = []

    def counting(expression: str, field: str = "spec.schedule.cron") -> object:
        calls.append(expression)
        return original(expression, field)

    monkeypatch.setattr(schedule_module, "parse_cron", counting)
    for _ in range(3):
        with pytest.raises(InvalidSpec, match="never fires"):
            CronSchedule.parse("0 0 30 2 *", "Europe/Paris")
    assert calls == ["0 0 30 2 *"]


def test_a_search_past_the_bound_is_refused_at_the_owner_naming_the_calendar(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever the calendar a message brings, the owner never searches past the bound: a
    # create is refused (INVALID_ARGUMENT naming spec.calendar), never an endless search.
    CronSchedule.parse("*/5 2 * * 1-5", "America/New_York")  # accepted, and remembered
    monkeypatch.setattr(schedule_search, "MOST_DAYS", 0)
    weekdays = Exclusions(tuple(DateRange(date(2026, 1, 5) + timedelta(days=7 * n),
                                          date(2026, 1, 9) + timedelta(days=7 * n))
                                for n in range(50))).normalised()
    with pytest.raises(ScheduleTooCostly) as refused:
        Job.create(job_id=__import__("uuid").UUID(int=2), spec=JobSpec(
            name="n", tenant="t", queue="q", handler="h", cron="*/5 2 * * 1-5",
            time_zone="America/New_York", calendar="c"), request_id="r",
            at=datetime(2026, 1, 5, tzinfo=UTC),
            calendar=AppliedCalendar("c", 1, True, weekdays))
    assert refused.value.field == "spec.calendar"
    assert "day steps" in refused.value.message


def test_a_search_past_the_bound_fails_the_job_when_it_fires(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # At fire time the error is the job's alone: the owner sets it aside (invariant 9,
    # commands/owner/firing.py turns any error of fire_due into JobFailed).
    job = Job.create(job_id=__import__("uuid").UUID(int=3), spec=JobSpec(
        name="n", tenant="t", queue="q", handler="h", cron="0 12 * * *",
        exclusions=Exclusions((DateRange(date(2026, 1, 6), date(2026, 1, 6)),))),
        request_id="r", at=datetime(2026, 1, 5, tzinfo=UTC))
    assert job.next_fire_at == datetime(2026, 1, 5, 12, tzinfo=UTC)
    monkeypatch.setattr(schedule_search, "MOST_DAYS", 0)
    with pytest.raises(ScheduleTooCostly):
        job.fire(datetime(2026, 1, 5, 12, tzinfo=UTC))
