"""The answers a cron schedule remembers (CronSchedule._answers) and the bisection of its
fields are exactly what computing afresh gives (issue 19: the owner's CPU per run)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.domain import schedule as schedule_module
from cronlog.domain.cron import parse_cron
from cronlog.domain.ids import run_id_for
from cronlog.domain.schedule import CronSchedule
from tests.support.examples import examples

EXPRESSIONS = ("* * * * * *", "*/7 5,17,40 * * * *", "0 9 * * 1-5", "30 2 * * *",
               "15,45 */3 * * *", "59 23 31 12 *")
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham")


def fresh(expression: str, zone: str) -> CronSchedule:
    """A schedule of its own, with nothing remembered (not the shared parsed one)."""
    return CronSchedule(parse_cron(expression), ZoneInfo(zone))


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(EXPRESSIONS), st.sampled_from(ZONES),
       st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31)))
def test_a_remembered_answer_is_the_computed_one(expression: str, zone: str,
                                                 after: datetime) -> None:
    instant = after.replace(tzinfo=UTC)
    shared = CronSchedule.parse(expression, zone)
    first = shared.next_fire_after(instant)
    again = shared.next_fire_after(instant)
    assert first == again == fresh(expression, zone).next_fire_after(instant)


def test_two_local_times_of_one_wall_time_are_two_questions() -> None:
    # 01:30 in New York happens twice on 2026-11-01; the two compare equal (same tzinfo,
    # fold ignored) but are an hour apart, and get different answers.
    zone = ZoneInfo("America/New_York")
    first = datetime(2026, 11, 1, 1, 30, 30, tzinfo=zone, fold=0)
    second = datetime(2026, 11, 1, 1, 30, 30, tzinfo=zone, fold=1)
    schedule = CronSchedule.parse("0 * * * * *", "UTC")
    assert schedule.next_fire_after(first) == datetime(2026, 11, 1, 5, 31, tzinfo=UTC)
    assert schedule.next_fire_after(second) == datetime(2026, 11, 1, 6, 31, tzinfo=UTC)


def test_answers_stay_bounded() -> None:
    schedule = fresh("* * * * * *", "UTC")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(schedule_module.REMEMBERED_ANSWERS + 10):
        schedule.next_fire_after(start + timedelta(seconds=n))
    assert len(schedule._answers) <= schedule_module.REMEMBERED_ANSWERS


def test_run_ids_do_not_depend_on_the_zone_an_instant_is_given_in() -> None:
    job_id = UUID(int=7)
    zone = ZoneInfo("America/New_York")
    first = datetime(2026, 11, 1, 1, 30, tzinfo=zone, fold=0)
    second = datetime(2026, 11, 1, 1, 30, tzinfo=zone, fold=1)
    assert run_id_for(job_id, first) == run_id_for(job_id, first.astimezone(UTC))
    assert run_id_for(job_id, first) != run_id_for(job_id, second)
    assert run_id_for(job_id, second) == run_id_for(job_id, second.astimezone(UTC))
