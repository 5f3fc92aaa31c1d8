"""Calendars as the owner decides them (issue 20), without servers: create and update with
their refusals, jobs subscribing with the api's snapshot, updates published to every
subscriber in the transaction that writes them, a calendar that does not exist, another
tenant's calendar, and leaving a calendar."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any
from uuid import UUID

from cronlog.commands.owner_ports import Outgoing, Produced
from cronlog.domain.calendar import Calendar
from cronlog.domain.catalogue import CalendarEvent
from cronlog.domain.exclusions import AppliedCalendar, DateRange, Exclusions, calendar_id
from cronlog.domain.ids import job_id_for_request
from cronlog.domain.spec import JobSpec
from tests.support.clock import T0
from tests.support.owner_inbox import create_message, inbound
from tests.support.owner_store import FakeStore
from tests.unit.commands.test_dependencies_owner import World

CALENDAR_EVENTS = frozenset(CalendarEvent)
DAILY = JobSpec(name="report", tenant="t", queue="q1", handler="echo", cron="0 9 * * *",
                calendar="holidays")


def days(*pairs: tuple[date, date]) -> list[dict[str, Any]]:
    return [{"first": a, "last": b} for a, b in pairs]


JAN_2 = days((date(2026, 1, 2), date(2026, 1, 2)))


class CalendarStore(FakeStore):
    """The fake store, with calendars kept from their committed events as the projection
    keeps the calendars table."""

    def __init__(self) -> None:
        super().__init__(replays=True)
        self.calendars: dict[UUID, Calendar] = {}

    def calendar(self, calendar_id: UUID) -> Calendar | None:
        return self.calendars.get(calendar_id)

    def published_calendar(self, calendar_id: UUID) -> AppliedCalendar | None:
        held = self.calendars.get(calendar_id)
        return (None if held is None
                else AppliedCalendar(held.name, held.version, True, held.exclusions))

    def calendar_versions(self, calendar_ids: Sequence[UUID]) -> dict[UUID, int]:
        return {c: self.calendars[c].version for c in calendar_ids if c in self.calendars}

    def stale_followers(self, partitions: Sequence[int], within: timedelta | None = None
                        ) -> list[tuple[UUID, UUID, int]]:
        """As the projection's query: found, and older than the calendar's row."""
        stale = []
        for job in self.jobs.values():
            if job.calendar is None or not job.calendar.found or job.status == "deleted":
                continue
            held = self.calendars.get(calendar_id(job.spec.tenant, job.calendar.name))
            if held is not None and job.calendar.version < held.version and 0 in partitions:
                stale.append((job.id, held.id, held.version))
        return stale

    def apply_partition(self, partition: int, epoch: int, job_events: Sequence[Produced],
              run_events: Sequence[Produced]) -> None:
        for e in job_events:
            if e.name in CALENDAR_EVENTS:
                self._apply_calendar(e.name, e.record)
        # A calendar command's request id is taken on the calendar's id.
        super().apply_partition(partition, epoch, [
            e for e in job_events if e.name not in CALENDAR_EVENTS
            and UUID(str(e.record.get("job_id"))) not in self.calendars], run_events)

    def _apply_calendar(self, name: str, r: dict[str, Any]) -> None:
        cid = UUID(str(r["calendar_id"]))
        held = self.calendars.get(cid)
        if name in (CalendarEvent.CREATED, CalendarEvent.UPDATED):
            exclusions = Exclusions(tuple(DateRange(x["first"], x["last"])
                                          for x in r["exclusions"]))
            self.calendars[cid] = Calendar.restore(
                cid, r["version"], r["at"], r["at"], tenant=r["tenant"], name=r["name"],
                description=r["description"], exclusions=exclusions,
                subscribers=held.subscribers if held else frozenset())
        elif held is not None:
            job = UUID(str(r["job_id"]))
            held.subscribers = (held.subscribers | {job} if name == CalendarEvent.JOB_SUBSCRIBED
                                else held.subscribers - {job})


class CalendarWorld(World):
    def __init__(self) -> None:
        super().__init__()
        self.store = CalendarStore()
        from tests.support.owner import make_owner

        self.owner = make_owner(self.store, self.transport, self.clock)

    def calendar(self, command: str, request_id: str, tenant: str = "t",
                 exclusions: list[dict[str, Any]] | None = None, **fields: Any) -> list[Outgoing]:
        sent = len(self.transport.transactions)
        self.offset += 1
        self.send(inbound(command, {"request_id": request_id, "tenant": tenant,
                                    "name": fields.pop("name", "holidays"),
                                    "description": "d", "exclusions": exclusions or [],
                                    "at": T0, "correlation_id": request_id, **fields},
                          self.offset))
        return [o for t in self.transport.transactions[sent:] for o in t]

    def create_job(self, spec: JobSpec, request_id: str, version: int = 0,
                   exclusions: list[dict[str, Any]] | None = None) -> UUID:
        message = create_message(spec, request_id)
        message.record.update(calendar_version=version, calendar_exclusions=exclusions or [])
        self.send(message)
        return job_id_for_request(spec.tenant, request_id)

    def written(self) -> list[Outgoing]:
        return [o for t in self.transport.transactions for o in t]


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
