"""Issue 13 item 2: every instant, duration and count a job carries is bounded, and no
schedule or retry computation overflows, whatever instant or policy reaches it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.domain.bounds import (
    EARLIEST_INSTANT,
    END_OF_TIME,
    LONGEST_DURATION,
    in_range,
    require_in_range,
    require_interval,
)
from cronlog.domain.cron import MAX_CRON_CHARS
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.policies import RetryPolicy
from cronlog.domain.schedule import (
    BoundedSchedule,
    CronSchedule,
    OneOffSchedule,
    Schedule,
    iter_fire_times,
    preview,
    zone_named,
)
from cronlog.domain.spec import MAX_NON_RETRYABLE, JobSpec, validate_spec
from tests.support.examples import examples

GOOD = JobSpec(name="bounded", tenant="acme", queue="default", handler="echo",
               cron="0 3 * * *", time_zone="Europe/Berlin")


def with_(**changes: object) -> JobSpec:
    return JobSpec(**{**GOOD.__dict__, **changes})


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
        ) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def refused(spec: JobSpec) -> InvalidSpec:
    with pytest.raises(InvalidSpec) as caught:
        validate_spec(spec)
    return caught.value


JUST_BEFORE_END = datetime(2099, 12, 31, 23, 59, 59, tzinfo=UTC)
EXTREME_INSTANTS = [
    datetime.min.replace(tzinfo=UTC),
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),  # before year 1 in UTC
    datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
    EARLIEST_INSTANT,
    JUST_BEFORE_END,
    END_OF_TIME,
    datetime(9999, 12, 31, tzinfo=UTC),
    datetime.max.replace(tzinfo=UTC),
    datetime.max.replace(tzinfo=timezone(timedelta(hours=-12))),  # past year 9999 in UTC
]
# Zones with DST (both hemispheres, a half-hour change), the extremes of UTC offsets.
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
         "Pacific/Kiritimati", "Pacific/Pago_Pago"]
CRONS = ["* * * * * *", "*/15 * * * *", "30 2 * * *", "0 0 29 2 *", "0 0 1 1 *"]


# --- the range itself -----------------------------------------------------------------------

def test_the_range_starts_at_the_epoch_inclusive_and_ends_before_2100() -> None:
    assert require_in_range(EARLIEST_INSTANT, "f") == EARLIEST_INSTANT
    last = END_OF_TIME - timedelta(microseconds=1)
    assert require_in_range(last, "f") == last
    for outside in (EARLIEST_INSTANT - timedelta(microseconds=1), END_OF_TIME,
                    datetime.max.replace(tzinfo=UTC), datetime.min.replace(tzinfo=UTC)):
        with pytest.raises(InvalidSpec) as caught:
            require_in_range(outside, "spec.start_at")
        assert caught.value.field == "spec.start_at"
        assert "1970-01-01" in caught.value.message and "2100-01-01" in caught.value.message


def test_a_time_without_offset_is_refused_before_the_range_is_checked() -> None:
    with pytest.raises(InvalidSpec, match="UTC offset"):
        require_in_range(datetime(2026, 1, 1), "spec.schedule.at")


def test_a_backfill_interval_names_the_end_out_of_range() -> None:
    assert require_interval(utc(2026, 1, 1), utc(2026, 1, 2)) == (utc(2026, 1, 1),
                                                                    utc(2026, 1, 2))
    with pytest.raises(InvalidSpec) as low:
        require_interval(utc(1969, 1, 1), utc(2026, 1, 2))
    assert low.value.field == "from"
    with pytest.raises(InvalidSpec) as high:
        require_interval(utc(2026, 1, 1), datetime.max.replace(tzinfo=UTC))
    assert high.value.field == "until"


@pytest.mark.parametrize(("field", "changes"), [
    ("spec.schedule.at", {"cron": None, "at": utc(1969, 12, 31, 23, 59, 59)}),
    ("spec.schedule.at", {"cron": None, "at": utc(2100, 1, 1)}),
    ("spec.start_at", {"start_at": datetime(9999, 12, 31, tzinfo=UTC)}),
    ("spec.start_at", {"start_at": datetime.min.replace(tzinfo=UTC)}),
    ("spec.end_at", {"end_at": datetime.max.replace(tzinfo=UTC)}),
])
def test_times_out_of_range_are_refused_naming_the_field(field: str,
                                                          changes: dict[str, object]) -> None:
    error = refused(with_(**changes))
    assert error.field == field
    assert "out of range" in error.message


def test_the_edges_of_the_range_are_accepted() -> None:
    assert validate_spec(with_(cron=None, at=EARLIEST_INSTANT)).at == EARLIEST_INSTANT
    last = utc(2099, 12, 31, 23, 59, 59)
    assert validate_spec(with_(cron=None, at=last)).at == last


# --- schedules never compute past the range ---------------------------------------------------

def _assert_in_range_after(schedule: Schedule, after: datetime) -> None:
    nxt = schedule.next_fire_after(after)
    if nxt is not None:
        assert in_range(nxt), f"{nxt} is out of range"
        assert nxt > after


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("expression", CRONS)
def test_cron_schedules_answer_in_range_or_none_for_extreme_instants(expression: str,
                                                                    zone: str) -> None:
    schedule = CronSchedule.parse(expression, zone)
    for after in EXTREME_INSTANTS:
        _assert_in_range_after(schedule, after)
    assert schedule.next_fire_after(END_OF_TIME) is None
    assert schedule.next_fire_after(datetime.max.replace(tzinfo=UTC)) is None
    # From before the range the answer is the schedule's first fire time in it.
    first = schedule.next_fire_after(datetime.min.replace(tzinfo=UTC))
    assert first is not None and first >= EARLIEST_INSTANT
    assert first == schedule.next_fire_after(EARLIEST_INSTANT - timedelta(microseconds=1))


def test_the_last_fire_times_before_2100_and_then_none() -> None:
    every_second = CronSchedule.parse("* * * * * *", "UTC")
    assert every_second.next_fire_after(JUST_BEFORE_END) is None
    assert preview(every_second, JUST_BEFORE_END - timedelta(seconds=2), 5) == [
        JUST_BEFORE_END - timedelta(seconds=1), JUST_BEFORE_END]
    every_minute = CronSchedule.parse("* * * * *", "Pacific/Kiritimati")
    tail = list(iter_fire_times(every_minute, utc(2099, 12, 31, 23)))
    assert len(tail) == 59 and tail[-1] == utc(2099, 12, 31, 23, 59)
    yearly = CronSchedule.parse("0 0 1 1 *", "America/New_York")
    assert yearly.next_fire_after(utc(2099, 1, 2)) is None  # 2100-01-01 local is past the end
    assert list(iter_fire_times(yearly, utc(2097, 6, 1))) == [
        utc(2098, 1, 1, 5), utc(2099, 1, 1, 5)]


@settings(max_examples=examples(150), deadline=None)
@given(after=st.datetimes(timezones=st.sampled_from([UTC, ZoneInfo("Europe/Berlin"),
                                                       timezone(timedelta(hours=14)),
                                                       timezone(timedelta(hours=-12))])),
       expression=st.sampled_from(CRONS), zone=st.sampled_from(ZONES))
def test_any_instant_gives_a_fire_time_in_range_or_none(after: datetime, expression: str,
                                                        zone: str) -> None:
    schedule = CronSchedule.parse(expression, zone)
    _assert_in_range_after(schedule, after)
    _assert_in_range_after(BoundedSchedule(schedule, start_at=after), after)
    _assert_in_range_after(BoundedSchedule(schedule, end_at=after), after)


def test_one_off_schedules_out_of_range_never_fire() -> None:
    # Such an `at` can only come from an event stored before the bounds existed.
    for at in (utc(1969, 7, 20), datetime(9999, 12, 31, tzinfo=UTC)):
        schedule = OneOffSchedule(at)
        for after in EXTREME_INSTANTS:
            assert schedule.next_fire_after(after) is None
    in_range_at = OneOffSchedule(utc(2099, 12, 31))
    assert in_range_at.next_fire_after(datetime.min.replace(tzinfo=UTC)) == utc(2099, 12, 31)


def test_bounded_schedules_with_extreme_bounds() -> None:
    hourly = CronSchedule.parse("0 * * * *", "Europe/Berlin")
    from_the_dawn_of_time = BoundedSchedule(hourly, start_at=datetime.min.replace(tzinfo=UTC),
                                            end_at=datetime.max.replace(tzinfo=UTC))
    assert from_the_dawn_of_time.next_fire_after(datetime.min.replace(tzinfo=UTC)) == \
        EARLIEST_INSTANT
    assert from_the_dawn_of_time.next_fire_after(JUST_BEFORE_END) is None
    never = BoundedSchedule(hourly, start_at=datetime.max.replace(tzinfo=UTC))
    for after in EXTREME_INSTANTS:
        assert never.next_fire_after(after) is None
    assert preview(never, utc(2026, 1, 1), 10) == []


def test_preview_counts_are_bounded() -> None:
    hourly = CronSchedule.parse("0 * * * *", "UTC")
    assert len(preview(hourly, utc(2026, 1, 1), 1000)) == 1000
    for count in (-1, 1001, 2**31 - 1):
        with pytest.raises(InvalidSpec) as caught:
            preview(hourly, utc(2026, 1, 1), count)
        assert caught.value.field == "count"


# --- schedules that can never fire -----------------------------------------------------------

@pytest.mark.parametrize("expression", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_cron_expression_without_any_fire_time_is_refused(expression: str) -> None:
    error = refused(with_(cron=expression))
    assert error.field == "spec.schedule.cron"
    assert "never fires" in error.message


def test_a_one_off_time_outside_its_own_bounds_is_refused() -> None:
    after_end = refused(with_(cron=None, at=utc(2026, 3, 1), end_at=utc(2026, 2, 1)))
    assert after_end.field == "spec.schedule.at" and "never fire" in after_end.message
    before_start = refused(with_(cron=None, at=utc(2026, 1, 1), start_at=utc(2026, 2, 1)))
    assert before_start.field == "spec.schedule.at" and "never fire" in before_start.message


def test_bounds_that_leave_no_fire_time_are_refused() -> None:
    new_year = with_(cron="0 0 1 1 *", time_zone="UTC")
    between = refused(JobSpec(**{**new_year.__dict__, "start_at": utc(2026, 2, 1),
                                 "end_at": utc(2026, 12, 31)}))
    assert between.field == "spec.end_at" and "never fire" in between.message
    too_late = refused(JobSpec(**{**new_year.__dict__, "start_at": utc(2099, 6, 1)}))
    assert too_late.field == "spec.start_at" and "never fire" in too_late.message


def test_past_times_that_can_fire_stay_allowed() -> None:
    # A one-off time in the past fires late, by the misfire policy.
    assert validate_spec(with_(cron=None, at=utc(1999, 12, 31))).at == utc(1999, 12, 31)
    # A cron job whose end has passed is kept for backfills.
    assert validate_spec(with_(end_at=utc(2000, 1, 1))).end_at == utc(2000, 1, 1)
    # Bounds exactly on a fire time count.
    exact = validate_spec(with_(cron="0 0 1 1 *", time_zone="UTC", start_at=utc(2030, 1, 1),
                                end_at=utc(2030, 1, 1, 0, 0, 1)))
    assert exact.schedule().next_fire_after(utc(2029, 6, 1)) == utc(2030, 1, 1)


def test_validation_computes_at_most_one_fire_time(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = with_(cron="17 4 * * 2", start_at=utc(2026, 1, 1), end_at=utc(2027, 1, 1))
    validate_spec(spec)  # parses (and caches) the expression
    calls: list[datetime] = []
    original = CronSchedule.next_fire_after

    def counting(self: CronSchedule, after: datetime) -> datetime | None:
        calls.append(after)
        return original(self, after)

    monkeypatch.setattr(CronSchedule, "next_fire_after", counting)
    validate_spec(spec)
    assert len(calls) <= 1
    calls.clear()
    validate_spec(with_(cron=None, at=utc(2026, 1, 1), end_at=utc(2027, 1, 1)))
    assert calls == []


# --- durations and the retry computation ------------------------------------------------------

@pytest.mark.parametrize(("field", "changes"), [
    ("spec.timeout", {"timeout": LONGEST_DURATION + timedelta(seconds=1)}),
    ("spec.heartbeat_timeout", {"heartbeat_timeout": timedelta.max}),
    ("spec.retry_policy.initial_backoff", {"retry_policy": RetryPolicy(
        initial_backoff=timedelta(days=8), max_backoff=timedelta(days=8))}),
    ("spec.retry_policy.initial_backoff", {"retry_policy": RetryPolicy(
        initial_backoff=timedelta(seconds=-1))}),
    ("spec.retry_policy.max_backoff", {"retry_policy": RetryPolicy(
        max_backoff=timedelta(days=999_999_999))}),
    ("spec.spread", {"spread": timedelta(hours=1, seconds=1)}),
    ("spec.spread", {"spread": timedelta(seconds=-1)}),
])
def test_durations_are_bounded_naming_the_field(field: str, changes: dict[str, object]) -> None:
    assert refused(with_(**changes)).field == field


def test_the_longest_durations_are_accepted() -> None:
    spec = validate_spec(with_(timeout=LONGEST_DURATION, heartbeat_timeout=LONGEST_DURATION,
                               spread=timedelta(hours=1), retry_policy=RetryPolicy(
                                   initial_backoff=LONGEST_DURATION,
                                   max_backoff=LONGEST_DURATION)))
    assert spec.retry_policy.max_backoff == LONGEST_DURATION


@settings(max_examples=examples(300), deadline=None)
@given(attempt=st.integers(-5, 10**18),
       coefficient=st.floats(allow_nan=True, allow_infinity=True),
       jitter=st.floats(allow_nan=True, allow_infinity=True),
       initial=st.timedeltas(), longest=st.timedeltas(),
       unit=st.floats(allow_nan=True, allow_infinity=True))
def test_the_next_backoff_never_overflows_whatever_the_policy(
        attempt: int, coefficient: float, jitter: float, initial: timedelta,
        longest: timedelta, unit: float) -> None:
    # Policies stored before today's bounds can hold anything a timedelta or float can.
    policy = RetryPolicy(initial_backoff=initial, max_backoff=longest,
                         coefficient=coefficient, jitter=jitter)
    wait = policy.backoff(attempt, unit)
    assert timedelta(0) <= wait <= min(max(longest, timedelta(0)), LONGEST_DURATION)
    assert JUST_BEFORE_END + wait < datetime.max.replace(tzinfo=UTC)


def test_a_huge_coefficient_reaches_the_cap_on_the_first_retry() -> None:
    policy = RetryPolicy(initial_backoff=timedelta(seconds=1), max_backoff=LONGEST_DURATION,
                         coefficient=100.0, jitter=0.0)
    assert policy.backoff(1, 0.5) == timedelta(seconds=1)
    assert policy.backoff(2, 0.5) == timedelta(seconds=100)
    assert policy.backoff(10**9, 0.5) == LONGEST_DURATION


# --- sizes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("errors", [
    tuple(f"E{i}" for i in range(MAX_NON_RETRYABLE + 1)), ("",), ("x" * 201,)])
def test_non_retryable_error_lists_are_bounded(errors: tuple[str, ...]) -> None:
    error = refused(with_(retry_policy=RetryPolicy(non_retryable_errors=errors)))
    assert error.field == "spec.retry_policy.non_retryable_errors"


def test_cron_expressions_and_zone_names_are_bounded() -> None:
    long_cron = refused(with_(cron="0" + " " * MAX_CRON_CHARS + "0 * * *"))
    assert long_cron.field == "spec.schedule.cron"
    for name in ("Europe/" + "x" * 100, "America"):  # a directory of the zone database
        with pytest.raises(InvalidSpec) as caught:
            zone_named(name)
        assert caught.value.field == "spec.time_zone"
