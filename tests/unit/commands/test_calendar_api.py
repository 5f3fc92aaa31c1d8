"""CalendarApi and the calendar snapshot of JobApi: bad input names its field and sends
nothing; commands are keyed by the (tenant, name) id and encode in the owner's schemas;
reads never cross tenants."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from uuid import UUID

import pytest

from cronlog.commands.api.calendar_api import ANY_VERSION, CalendarApi
from cronlog.commands.api.calendar_snapshot import CalendarMissing
from cronlog.commands.api.job_api import CommandRejected
from cronlog.commands.api.ports import CalendarView
from cronlog.domain.calendar import MAX_SUBSCRIBERS, CalendarNotFound
from cronlog.domain.catalogue import Command
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import AppliedCalendar, Exclusions, calendar_id
from cronlog.domain.ids import backfill_run_id
from cronlog.domain.limits import TenantLimitReached
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from tests.support.api_ports import (
    NOW,
    Calendars,
    CreatedJobs,
    NoJobs,
    RecordingBus,
    Row,
    job_api,
    view,
)
from tests.support.clock import FakeClock


def api(bus: RecordingBus, calendars: Calendars, **options: Any) -> CalendarApi:
    return CalendarApi(bus=bus, calendars=calendars, clock=FakeClock(NOW), read_your_write_timeout=0,
                       **options)


def encoded(name: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """The record as the owner reads it, sent the way KafkaCommandChannel sends it."""
    codec = AvroCodec()
    decoded_name, decoded = codec.decode(codec.encode(name, {**record,
                                                             "correlation_id": "c0ffee"}))
    assert decoded_name == name
    return decoded


def test_create_sends_a_create_calendar_keyed_by_the_tenant_and_name_id() -> None:
    calendars = Calendars()
    bus = RecordingBus(shows=calendars)
    api(bus, calendars).create(
        "r-1", "acme", "holidays", "UK bank holidays", ["2026-12-26", "2026-12-25",
                                                        "2027-01-01..2027-01-02"])
    [(key, name, record)] = bus.sent
    assert (key, name) == (str(calendar_id("acme", "holidays")), Command.CREATE_CALENDAR)
    assert key != str(calendar_id("other", "holidays"))
    decoded = encoded(name, record)
    assert (decoded["tenant"], decoded["name"], decoded["description"]) == (
        "acme", "holidays", "UK bank holidays")
    # Normalised: sorted, adjacent days merged.
    assert decoded["exclusions"] == [
        {"first": date(2026, 12, 25), "last": date(2026, 12, 26)},
        {"first": date(2027, 1, 1), "last": date(2027, 1, 2)}]


@pytest.mark.parametrize(("tenant", "name", "description", "exclusions", "field_name"), [
    ("", "holidays", "", [], "tenant"),
    ("acme/x", "holidays", "", [], "tenant"),
    ("acme", "", "", [], "name"),
    ("acme", "bank holidays", "", [], "name"),
    ("acme", "h" * 129, "", [], "name"),
    ("acme", "holidays", "d" * 1001, [], "description"),
    ("acme", "holidays", "", ["2026-02-30"], "exclusions"),
    ("acme", "holidays", "", ["25/12/2026"], "exclusions"),
    ("acme", "holidays", "", ["2026-12-26..2026-12-25"], "exclusions"),
    ("acme", "holidays", "", ["1969-12-31"], "exclusions"),
    ("acme", "holidays", "", ["2100-01-01"], "exclusions"),
    ("acme", "holidays", "", ["2026-01-01"] * 1001, "exclusions"),
])
def test_bad_input_names_its_field_and_sends_nothing(tenant: str, name: str, description: str,
                                                      exclusions: list[str],
                                                      field_name: str) -> None:
    bus = RecordingBus()
    calls: tuple[Callable[[], object], ...] = (
        lambda: api(bus, Calendars()).create("r", tenant, name, description, exclusions),
        lambda: api(bus, Calendars()).update("r", tenant, name, description, exclusions, 0))
    for call in calls:
        with pytest.raises(InvalidSpec) as raised:
            call()
        assert raised.value.field == field_name
    assert bus.sent == []


def test_a_tenant_at_its_calendar_limit_creates_no_more() -> None:
    calendars = Calendars()
    bus = RecordingBus(shows=calendars)
    calendars.add(view("acme", "a"))
    calendars.add(view("acme", "b"))
    with pytest.raises(TenantLimitReached):
        api(bus, calendars, max_per_tenant=2).create("r", "acme", "c", "", [])
    assert bus.sent == []
    # Another tenant's calendars do not count; a retry of an existing one is the owner's.
    api(bus, calendars, max_per_tenant=2).create("r", "other", "c", "", [])
    api(bus, calendars, max_per_tenant=2).create("r", "acme", "a", "", [])
    assert len(bus.sent) == 2


def test_update_carries_the_expected_version_or_any() -> None:
    bus, calendars = RecordingBus(reply={"ok": True, "job_version": 2}), Calendars()
    calendars.add(view("acme", "holidays", 2))
    api(bus, calendars).update("r-1", "acme", "holidays", "", ["2026-12-24"], 0)
    api(bus, calendars).update("r-2", "acme", "holidays", "", [], 1)
    records = [encoded(name, record) for _, name, record in bus.sent]
    assert [r["expected_version"] for r in records] == [ANY_VERSION, 1]
    assert records[1]["exclusions"] == []
    with pytest.raises(InvalidSpec) as raised:
        api(bus, calendars).update("r-3", "acme", "holidays", "", [], -2)
    assert raised.value.field == "expected_version"


def test_reads_see_only_the_tenants_own_calendars() -> None:
    calendars = Calendars()
    calendars.add(view("acme", "holidays", 1, "2026-12-25"))
    calendars.add(view("acme", "audits"))
    calendars.add(view("other", "secret"))
    reads = api(RecordingBus(), calendars)
    assert reads.get("acme", "holidays").exclusions.texts() == ["2026-12-25"]
    with pytest.raises(CalendarNotFound):
        reads.get("acme", "secret")
    with pytest.raises(CalendarNotFound):
        reads.get("other", "holidays")
    page, _ = reads.list("acme", 100, None)
    assert [v.name for v in page] == ["audits", "holidays"]
    with pytest.raises(InvalidSpec):
        reads.list("", 100, None)


def test_a_refusal_of_the_owner_reaches_the_caller() -> None:
    bus = RecordingBus(reply={"ok": False, "error_code": "ALREADY_EXISTS",
                              "error_message": "calendar holidays already exists",
                              "error_field": "name"})
    with pytest.raises(CommandRejected) as raised:
        api(bus, Calendars()).create("r", "acme", "holidays", "", [])
    assert (raised.value.status, raised.value.field) == ("ALREADY_EXISTS", "name")


@dataclass
class JobsAfterSend(NoJobs):
    """No job until the bus has sent its creation: a first create, not a retry."""

    bus: RecordingBus

    def get(self, job_id: UUID) -> Any:
        return Row() if self.bus.sent else None


SPEC = JobSpec(name="n", tenant="acme", queue="default", handler="echo", cron="0 9 * * *",
               time_zone="Europe/London", calendar="holidays",
               exclusions=Exclusions.parse(["2026-12-31"], "spec.exclusions"))


def test_a_job_on_a_calendar_carries_its_snapshot() -> None:
    bus, calendars = RecordingBus(), Calendars()
    calendars.add(view("acme", "holidays", 4, "2026-12-25..2026-12-26"))
    job_api(bus, calendars, JobsAfterSend(bus)).create_job("r-1", SPEC)
    job_api(bus, calendars, CreatedJobs()).update_job("r-2", UUID(int=7), 1, SPEC)
    (_, create, created), (_, update, updated) = bus.sent
    for name, record in ((create, created), (update, updated)):
        decoded = encoded(name, record)
        assert decoded["calendar_version"] == 4
        assert decoded["calendar_exclusions"] == [
            {"first": date(2026, 12, 25), "last": date(2026, 12, 26)}]
        assert decoded["spec"]["calendar"] == "holidays"


def test_a_job_without_a_calendar_carries_an_empty_snapshot() -> None:
    bus = RecordingBus()
    job_api(bus, Calendars(), CreatedJobs()).update_job(
        "r", UUID(int=7), 1, JobSpec(name="n", tenant="acme", queue="default", handler="echo",
                                     cron="0 9 * * *"))
    [(_, name, record)] = bus.sent
    decoded = encoded(name, record)
    assert (decoded["calendar_version"], decoded["calendar_exclusions"]) == (0, [])


@pytest.mark.parametrize("tenant_calendars", [
    [view("other", "holidays")],  # another tenant's of the same name is not the caller's
    [],
])
def test_a_job_naming_a_missing_calendar_is_refused_before_anything_is_sent(
        tenant_calendars: list[CalendarView]) -> None:
    bus, calendars = RecordingBus(), Calendars()
    for calendar in tenant_calendars:
        calendars.add(calendar)
    calls: tuple[Callable[[], object], ...] = (
        lambda: job_api(bus, calendars).create_job("r-1", SPEC),
        lambda: job_api(bus, calendars, CreatedJobs()).update_job("r-2", UUID(int=7), 1, SPEC),
        lambda: job_api(bus, None).create_job("r-3", SPEC))
    for call in calls:
        with pytest.raises(CalendarMissing) as raised:
            call()
        assert raised.value.field == "spec.calendar"
    assert bus.sent == []


@dataclass
class CalendarJobRow:
    version: int = 2
    status: str = "active"
    calendar: AppliedCalendar | None = None


class OneJob(NoJobs):
    def __init__(self, row: CalendarJobRow) -> None:
        self.row = row

    def get(self, job_id: UUID) -> Any:
        return self.row


def test_a_backfill_answers_the_run_ids_of_the_days_the_calendar_leaves() -> None:
    """The owner backfills the job's fire times without its calendar's days; the run ids the
    api answers must be those, not the plain schedule's."""
    daily = JobSpec(name="n", tenant="acme", queue="default", handler="echo",
                    cron="0 9 * * *", calendar="holidays")
    job_id = UUID(int=7)
    applied = AppliedCalendar("holidays", 3, True,
                              Exclusions.parse(["2026-11-25"], "exclusions"))
    for calendar, days in ((applied, [24, 26]), (AppliedCalendar("holidays", 0, False),
                                                 [24, 25, 26]), (None, [24, 25, 26])):
        ids = job_api(RecordingBus(reply={"ok": True, "job_version": 2}), Calendars(),
                      OneJob(CalendarJobRow(calendar=calendar))).backfill_job(
            "r", job_id, datetime(2026, 11, 24, tzinfo=UTC),
            datetime(2026, 11, 26, 12, tzinfo=UTC), lambda row: daily)
        assert ids == [backfill_run_id(job_id, "r", datetime(2026, 11, d, 9, tzinfo=UTC))
                       for d in days]


def test_a_job_cannot_join_a_calendar_that_has_its_most_followers() -> None:
    bus, calendars = RecordingBus(), Calendars()
    full = view("acme", "holidays", 1)
    calendars.add(CalendarView(**{**full.__dict__, "subscribers": MAX_SUBSCRIBERS}))
    with pytest.raises(TenantLimitReached):
        job_api(bus, calendars).create_job("r-1", SPEC)
    with pytest.raises(TenantLimitReached):
        job_api(bus, calendars, CreatedJobs()).update_job("r-2", UUID(int=7), 1, SPEC)
    assert bus.sent == []
    # A job that follows it already may change the rest of its spec.
    following = OneJob(CalendarJobRow(calendar=AppliedCalendar("holidays", 1)))
    job_api(bus, calendars, following).update_job("r-3", UUID(int=7), 1, SPEC)
    assert len(bus.sent) == 1
