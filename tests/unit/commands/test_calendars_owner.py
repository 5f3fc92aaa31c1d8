"""Calendars as the owner decides them (issue 20), without servers: create and update with
their refusals, jobs subscribing with the api's snapshot, updates published to every
subscriber in the transaction that writes them, a calendar that does not exist, another
tenant's calendar, and leaving a calendar."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any

from cronlog.commands.owner.ports import Outgoing
from cronlog.domain.exclusions import calendar_id
from tests.support.clock import T0
from tests.support.owner_inbox import DAILY, JAN_2, days, inbound
from tests.support.owner_world import CalendarWorld


def reply(out: list[Outgoing]) -> dict[str, Any]:
    return dict(next(o.record for o in out if o.name == "CommandReply"))


def test_a_calendar_is_created_once_under_its_tenant_and_name() -> None:
    world = CalendarWorld()
    out = world.calendar("CreateCalendar", "c1", exclusions=JAN_2)
    cid = calendar_id("t", "holidays")
    created = [o for o in out if o.name == "CalendarCreated"]
    assert len(created) == 1 and created[0].key == str(cid) and created[0].topic == "job-events"
    assert reply(out)["ok"] and reply(out)["job_version"] == 1
    assert reply(out)["job_id"] == str(cid)
    again = world.calendar("CreateCalendar", "c2")
    assert reply(again)["error_code"] == "ALREADY_EXISTS"
    assert not [o for o in again if o.name == "CalendarCreated"]


def test_updates_are_refused_naming_why() -> None:
    world = CalendarWorld()
    assert reply(world.calendar("UpdateCalendar", "u0"))["error_code"] == "NOT_FOUND"
    world.calendar("CreateCalendar", "c1")
    stale = reply(world.calendar("UpdateCalendar", "u1", expected_version=7))
    assert stale["error_code"] == "FAILED_PRECONDITION"
    assert stale["error_field"] == "expected_version"
    backwards = days((date(2026, 1, 3), date(2026, 1, 2)))
    bad = reply(world.calendar("UpdateCalendar", "u2", exclusions=backwards))
    assert bad["error_code"] == "INVALID_ARGUMENT" and bad["error_field"] == "exclusions"
    bad_name = reply(world.calendar("CreateCalendar", "c3", name="no/slashes"))
    assert bad_name["error_code"] == "INVALID_ARGUMENT" and bad_name["error_field"] == "name"
    ok = reply(world.calendar("UpdateCalendar", "u3", expected_version=1, exclusions=JAN_2))
    assert ok["ok"] and ok["job_version"] == 2


def test_a_job_follows_its_calendar_and_hears_of_every_update() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1")
    job_id = world.create_job(DAILY, "j1", version=1)
    job = world.store.jobs[job_id]
    assert job.calendar is not None and (job.calendar.name, job.calendar.version) == (
        "holidays", 1)
    assert job.next_fire_at == datetime(2026, 1, 2, 9, tzinfo=UTC)
    cid = calendar_id("t", "holidays")
    assert world.store.calendars[cid].subscribers == {job_id}
    # The owner answered the subscription with version 1, which the job holds already.
    assert [o.name for o in world.written() if o.key == str(job_id)].count(
        "JobCalendarApplied") == 1

    out = world.calendar("UpdateCalendar", "u1", exclusions=JAN_2)
    # In the same transaction as the update.
    together = next(t for t in world.transport.transactions
                    if any(o.name == "CalendarUpdated" for o in t))
    published = [o for o in together if o.name == "CalendarPublished"]
    assert published and published == [o for o in out if o.name == "CalendarPublished"]
    assert published[0].key == str(job_id) and published[0].record["version"] == 2
    job = world.store.jobs[job_id]
    assert job.calendar is not None and job.calendar.version == 2
    assert job.next_fire_at == datetime(2026, 1, 3, 9, tzinfo=UTC)


def test_a_publication_seen_again_or_older_is_not_applied() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1", exclusions=JAN_2)
    job_id = world.create_job(DAILY, "j1", version=1, exclusions=JAN_2)
    version = world.store.jobs[job_id].version
    world.offset += 1
    world.send(inbound("CalendarPublished", {
        "job_id": str(job_id), "calendar_id": str(calendar_id("t", "holidays")),
        "tenant": "t", "name": "holidays", "version": 1, "found": True, "exclusions": [],
        "at": T0}, world.offset))
    assert world.store.jobs[job_id].version == version
    assert world.store.jobs[job_id].next_fire_at == datetime(2026, 1, 3, 9, tzinfo=UTC)


def test_a_job_naming_no_existing_calendar_fires_as_if_it_named_none() -> None:
    world = CalendarWorld()
    job_id = world.create_job(DAILY, "j1")
    job = world.store.jobs[job_id]
    assert job.calendar is not None and not job.calendar.found
    assert job.next_fire_at == datetime(2026, 1, 2, 9, tzinfo=UTC)
    assert calendar_id("t", "holidays") not in world.store.calendars


def test_another_tenants_calendar_of_the_same_name_is_not_found() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1", tenant="a", exclusions=JAN_2)
    job_id = world.create_job(replace(DAILY, tenant="b"), "j1")
    job = world.store.jobs[job_id]
    assert job.calendar is not None and not job.calendar.found
    assert job.next_fire_at == datetime(2026, 1, 2, 9, tzinfo=UTC)
    assert world.store.calendars[calendar_id("a", "holidays")].subscribers == frozenset()
    # A forged subscription naming tenant b under tenant a's calendar id is told "not found".
    world.offset += 1
    world.send(inbound("CalendarSubscribed", {
        "calendar_id": str(calendar_id("a", "holidays")), "tenant": "b", "name": "holidays",
        "job_id": str(job_id), "at": T0}, world.offset))
    assert world.store.calendars[calendar_id("a", "holidays")].subscribers == frozenset()
    assert not world.store.jobs[job_id].calendar.found  # type: ignore[union-attr]


def test_a_job_that_drops_its_calendar_leaves_it() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1")
    job_id = world.create_job(DAILY, "j1", version=1)
    from cronlog.infra.avro.event_mapping import spec_to_record

    world.offset += 1
    world.send(inbound("UpdateJob", {
        "request_id": "u1", "job_id": str(job_id), "at": T0, "expected_version": 0,
        "spec": spec_to_record(replace(DAILY, calendar=None))}, world.offset))
    assert world.store.jobs[job_id].calendar is None
    assert world.store.calendars[calendar_id("t", "holidays")].subscribers == frozenset()
    out = world.calendar("UpdateCalendar", "u2", exclusions=JAN_2)
    assert not [o for o in out if o.name == "CalendarPublished"]
    assert world.store.jobs[job_id].next_fire_at == datetime(2026, 1, 2, 9, tzinfo=UTC)


def test_a_deleted_job_leaves_its_calendar() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1")
    job_id = world.create_job(DAILY, "j1", version=1)
    world.offset += 1
    world.send(inbound("DeleteJob", {"request_id": "d1", "job_id": str(job_id), "at": T0},
                       world.offset))
    assert world.store.calendars[calendar_id("t", "holidays")].subscribers == frozenset()
