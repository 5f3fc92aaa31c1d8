"""Calendars at the gRPC edge: excluded days and calendar names in and out of specs, bounds
checked before parsing, the tenant a request acts for, page tokens."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from cronlog.commands.api.calendar_api import CalendarApi
from cronlog.commands.api.calendar_snapshot import CalendarMissing
from cronlog.commands.api.ports import CalendarView
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import AppliedCalendar, DateRange, Exclusions, calendar_id
from cronlog.infra.grpc import calendar_rpcs, convert
from cronlog.infra.postgres.calendar_reads import (
    InvalidCalendarPageToken,
    calendar_view,
    decode_page_token,
    encode_page_token,
)
from cronlog.v1 import job_service_pb2 as pb
from tests.support.clock import FakeClock

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def spec(**fields: object) -> pb.JobSpec:
    return pb.JobSpec(name="n", tenant="acme", handler="echo", cron="0 9 * * *",
                      **fields)  # type: ignore[arg-type]


def test_excluded_days_and_the_calendar_travel_in_and_out_of_a_spec() -> None:
    message = spec(exclusions=["2026-12-26", "2026-12-25", "2027-01-01..2027-01-03"],
                   calendar="uk-holidays")
    domain = convert.spec_in(message)
    assert domain.calendar == "uk-holidays"
    assert domain.exclusions.ranges == (DateRange(date(2026, 12, 25), date(2026, 12, 26)),
                                        DateRange(date(2027, 1, 1), date(2027, 1, 3)))
    out = convert.spec_out(domain)
    assert list(out.exclusions) == ["2026-12-25..2026-12-26", "2027-01-01..2027-01-03"]
    assert out.calendar == "uk-holidays"
    plain = convert.spec_in(spec())
    assert (plain.calendar, bool(plain.exclusions)) == (None, False)
    assert (convert.spec_out(plain).calendar, list(convert.spec_out(plain).exclusions)) == (
        "", [])


@pytest.mark.parametrize("texts", [
    ["2026-12-25", "christmas"], ["2026-12-25.."], ["..2026-12-25"], ["2026-12-25...2026-12-26"],
    ["2026-12-25 "], ["+2026-12-25"], ["2026-12-25" + "x" * 10_000], ["2027-02-29"],
    ["2026-12-26..2026-12-25"], ["2100-01-01"],
])
def test_a_bad_excluded_day_is_refused_naming_the_field(texts: list[str]) -> None:
    with pytest.raises(InvalidSpec) as raised:
        convert.spec_in(spec(exclusions=texts))
    assert raised.value.field == "spec.exclusions"
    assert len(str(raised.value)) < 200  # never the whole of a huge entry echoed


def test_too_many_excluded_days_are_refused_before_any_is_parsed() -> None:
    # 1001 entries, none of them a date: the count alone refuses them.
    with pytest.raises(InvalidSpec, match="at most 1000") as raised:
        convert.exclusions_in(["x"] * 1001, "spec.exclusions")
    assert raised.value.field == "spec.exclusions"
    assert len(convert.exclusions_in(["2026-01-01"] * 1000, "f").ranges) == 1


def test_the_tenant_is_the_callers_or_required_without_tokens() -> None:
    assert calendar_rpcs.tenant_of("acme", "") == "acme"
    assert calendar_rpcs.tenant_of("acme", "acme") == "acme"
    assert calendar_rpcs.tenant_of(None, "beta") == "beta"
    with pytest.raises(InvalidSpec) as raised:
        calendar_rpcs.tenant_of(None, "")
    assert raised.value.field == "tenant"


def test_an_applied_calendar_shows_what_the_job_follows() -> None:
    assert calendar_rpcs.applied_calendar_out(None) is None
    shown = calendar_rpcs.applied_calendar_out(AppliedCalendar(
        "holidays", 3, True, Exclusions.parse(["2026-12-25"], "f")))
    assert shown == pb.AppliedCalendar(name="holidays", version=3, found=True,
                                       exclusions=["2026-12-25"])
    missing = calendar_rpcs.applied_calendar_out(AppliedCalendar("gone", 0, False))
    assert missing == pb.AppliedCalendar(name="gone", found=False)


def test_a_calendar_row_reads_back_as_written() -> None:
    row = ("acme", "holidays", calendar_id("acme", "holidays"), 2, "bank holidays",
           ["2026-12-25..2026-12-26"], 5, NOW)
    shown = calendar_rpcs.calendar_out(calendar_view(row))
    assert shown == pb.Calendar(name="holidays", description="bank holidays",
                                exclusions=["2026-12-25..2026-12-26"], version=2, jobs=5,
                                tenant="acme", updated_at=convert.timestamp_out(NOW))


@pytest.mark.parametrize("token", ["", "!!!", encode_page_token("a b"),
                                   encode_page_token("x" * 129), "a" * 30])
def test_a_page_token_not_given_out_here_is_refused(token: str) -> None:
    with pytest.raises(InvalidCalendarPageToken) as raised:
        decode_page_token(token)
    assert raised.value.field == "page_token"


def test_a_page_token_is_the_last_name() -> None:
    assert decode_page_token(encode_page_token("uk.holidays-2026")) == "uk.holidays-2026"


class Reads:
    def __init__(self, *calendars: CalendarView) -> None:
        self.rows = {(c.tenant, c.name): c for c in calendars}

    def calendar(self, tenant: str, name: str) -> CalendarView | None:
        return self.rows.get((tenant, name))

    def calendars(self, tenant: str, page_size: int,
                  page_token: str | None) -> tuple[list[CalendarView], str | None]:
        return [], None

    def count_calendars(self, tenant: str) -> int:
        return 0


class NoBus:
    def send(self, *args: object) -> dict[str, object]:
        raise AssertionError("a preview sends nothing")


def test_a_preview_skips_its_own_and_its_calendars_days() -> None:
    holidays = CalendarView("acme", "holidays", calendar_id("acme", "holidays"), 1, "",
                            Exclusions.parse(["2026-12-25"], "f"), 0, NOW)
    api = CalendarApi(bus=NoBus(), calendars=Reads(holidays), clock=FakeClock(NOW))
    request = pb.PreviewScheduleRequest(cron="0 9 * * *", exclusions=["2026-12-24"],
                                        calendar="holidays")
    excluded, words = calendar_rpcs.preview_exclusions(api, "acme", request)
    assert excluded.texts() == ["2026-12-24..2026-12-25"]
    assert words == "calendar holidays and 1 excluded date or range"
    # Another tenant's calendar of that name is not found, whatever the request says.
    with pytest.raises(CalendarMissing) as raised:
        calendar_rpcs.preview_exclusions(api, "beta", request)
    assert raised.value.field == "calendar"
    # Without tokens the tenant must be named.
    with pytest.raises(InvalidSpec) as no_tenant:
        calendar_rpcs.preview_exclusions(api, None, request)
    assert no_tenant.value.field == "tenant"
    own, own_words = calendar_rpcs.preview_exclusions(
        None, None, pb.PreviewScheduleRequest(exclusions=["2026-12-24", "2026-12-31"]))
    assert (own.texts(), own_words) == (["2026-12-24", "2026-12-31"],
                                        "2 excluded dates or ranges")


def test_a_page_of_large_calendars_fits_one_response() -> None:
    days = [f"{2030 + n // 300}-{1 + n % 300 // 28:02d}-{1 + n % 28:02d}"
            for n in range(0, 1000 * 2, 2)]
    many = Exclusions.parse(days, "f")
    big = [CalendarView("acme", f"cal-{n:04d}", calendar_id("acme", f"cal-{n:04d}"), 1, "",
                        many, 0, NOW) for n in range(300)]
    assert len(big[0].exclusions.ranges) > 500

    class Listed(Reads):
        def calendars(self, tenant: str, page_size: int,
                      page_token: str | None) -> tuple[list[CalendarView], str | None]:
            return big[:page_size], "next-of-the-store"

    api = CalendarApi(bus=NoBus(), calendars=Listed(), clock=FakeClock(NOW))
    answer = calendar_rpcs.list_calendars(api, "acme", pb.ListCalendarsRequest(page_size=300))
    assert 0 < len(answer.calendars) < 300
    assert answer.ByteSize() <= 3 * 1024 * 1024
    assert decode_page_token(answer.next_page_token) == answer.calendars[-1].name
    small = calendar_rpcs.list_calendars(api, "acme", pb.ListCalendarsRequest(page_size=2))
    assert (len(small.calendars), small.next_page_token) == (2, "next-of-the-store")
