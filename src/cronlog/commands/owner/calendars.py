"""Calendars as an owner decides them (issue 20, docs/calendars.md).

On a calendar's owner (the owner of its id's partition): CreateCalendar and UpdateCalendar
become the calendar's events; jobs that name it subscribe (CalendarSubscribed) and are
answered with its current version, and every update is published to each subscribing job in
the transaction that writes it. On a job's owner: a job created or updated naming a
calendar starts from the api's snapshot and subscribes; a published version newer than the
job's is applied (JobCalendarApplied), which searches its next fire time again.

Every relay is idempotent and in order per key (the inbox keeps order per partition): a
second subscription adds nothing, an older or repeated publication is not applied.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any
from uuid import UUID

from cronlog.commands.messages import (
    CalendarCommand,
    CreateCalendar,
    JobSpecCommand,
    UpdateCalendar,
    typed,
)
from cronlog.commands.owner import owner_messages as messages
from cronlog.commands.owner import relays
from cronlog.commands.owner.calendar_followers import CalendarFollowers
from cronlog.commands.owner.owner_cycle import Cycle, Handler
from cronlog.commands.owner.ports import EventRecords, Outgoing, OwnerStore, Topics
from cronlog.commands.owner.request_ids import Answered, Outcome, Request, earlier_outcome
from cronlog.domain.calendar import Calendar, CalendarFull
from cronlog.domain.catalogue import CalendarEvent, Command, Relay
from cronlog.domain.errors import DomainError, InvalidSpec, StaleVersion
from cronlog.domain.exclusions import (
    AppliedCalendar,
    DateRange,
    Exclusions,
    calendar_id,
    validate_exclusions,
)
from cronlog.domain.ids import as_uuid
from cronlog.domain.job import Job
from cronlog.domain.job_status import DELETED
from cronlog.ports import Record

log = logging.getLogger(__name__)


def exclusions_in(records: Any, field: str) -> Exclusions:
    """Excluded days from a message's DateRange records, validated and normalised."""
    try:
        ranges = tuple(DateRange(r["first"], r["last"]) for r in records or ())
    except (KeyError, TypeError) as exc:
        raise InvalidSpec(field, "each exclusion is a range of two dates") from exc
    return validate_exclusions(Exclusions(ranges), field)


def exclusions_out(exclusions: Exclusions) -> list[dict[str, Any]]:
    return [{"first": r.first, "last": r.last} for r in exclusions.ranges]


def snapshot_of(command: JobSpecCommand, name: str | None) -> AppliedCalendar | None:
    """The api's snapshot of the calendar a CreateJob, UpdateJob or RestoreJob names
    (version 0: none)."""
    version = int(command.calendar_version or 0)
    if name is None or version <= 0:
        return None
    return AppliedCalendar(name, version, True,
                           exclusions_in(command.calendar_exclusions, "calendar_exclusions"))


class Calendars:
    def __init__(self, store: OwnerStore, records: EventRecords, topics: Topics,
                 followers: CalendarFollowers) -> None:
        self._store = store
        self._records = records
        self._topics = topics
        self._followers = followers

    def handlers(self) -> dict[str, Handler]:
        return {Command.CREATE_CALENDAR: typed(CreateCalendar, self._create),
                Command.UPDATE_CALENDAR: typed(UpdateCalendar, self._update),
                Relay.CALENDAR_SUBSCRIBED: self._subscribed,
                Relay.CALENDAR_UNSUBSCRIBED: self._unsubscribed,
                Relay.CALENDAR_PUBLISHED: self._published}

    # -- the job's side ------------------------------------------------------------------
    def respec(self, job: Job, before: str | None, now: datetime, cycle: Cycle) -> None:
        """After a create, update or delete of a job: subscribes to the calendar it names
        now, and leaves the one it named before."""
        after = job.spec.calendar if job.status != DELETED else None
        if after == before:
            return
        tenant = job.spec.tenant
        if before is not None:
            cycle.relays.append(relays.calendar_subscribed(
                self._topics, calendar_id(tenant, before), tenant, before, job.id, now,
                subscribed=False))
        if after is not None:
            cycle.relays.append(relays.calendar_subscribed(
                self._topics, calendar_id(tenant, after), tenant, after, job.id, now))

    def _published(self, record: Record, now: datetime, cycle: Cycle) -> None:
        if record.get("by_reference"):
            # An update: the job is marked, and applies the calendar's row within a later
            # part of the budget, or before it fires (commands/owner/calendar_followers.py).
            self._followers.published(record)
            return
        job = cycle.job(as_uuid(record["job_id"]))
        name = str(record["name"])
        if (job is None or job.status == DELETED or job.spec.tenant != str(record["tenant"])
                or job.spec.calendar != name):
            # Deleted, or naming another calendar since it subscribed: the unsubscription
            # is on its way to the calendar's owner.
            return
        applied = AppliedCalendar(name, int(record["version"]), bool(record["found"]),
                                  exclusions_in(record.get("exclusions"), "exclusions"))
        if not applied.found:
            log.warning("job %s names calendar %r, which its tenant does not have: it fires "
                        "as if it named none", job.id, name)
        job.apply_calendar(applied, None, now)

    # -- the calendar's side: jobs following it ------------------------------------------
    def _calendar(self, cid: UUID, cycle: Cycle) -> Calendar | None:
        if cid not in cycle.calendars:
            cycle.calendars[cid] = self._store.calendar(cid)
        return cycle.calendars[cid]

    def _subscribed(self, record: Record, now: datetime, cycle: Cycle) -> None:
        cid, job_id = as_uuid(record["calendar_id"]), as_uuid(record["job_id"])
        tenant, name = str(record["tenant"]), str(record["name"])
        calendar = self._calendar(cid, cycle)
        # Another tenant's calendar and a missing one look the same (invariant 10): the id
        # derives from the tenant, so this can only be a message the api did not write.
        if calendar is None or calendar.tenant != tenant or calendar.name != name:
            cycle.relays.append(relays.calendar_published(
                self._topics, job_id, cid, tenant, name, 0, False, [], now))
            return
        try:
            if calendar.subscribe(job_id):
                cycle.replies.append(self._subscription(calendar, job_id, now, True))
        except CalendarFull as exc:
            log.warning("job %s cannot follow calendar %s: %s", job_id, cid, exc)
            cycle.relays.append(relays.calendar_published(
                self._topics, job_id, cid, tenant, name, 0, False, [], now))
            return
        cycle.relays.append(self._publication(calendar, job_id, now))

    def _unsubscribed(self, record: Record, now: datetime, cycle: Cycle) -> None:
        calendar = self._calendar(as_uuid(record["calendar_id"]), cycle)
        job_id = as_uuid(record["job_id"])
        if (calendar is not None and calendar.tenant == str(record["tenant"])
                and calendar.unsubscribe(job_id)):
            cycle.replies.append(self._subscription(calendar, job_id, now, False))

    def _subscription(self, calendar: Calendar, job_id: UUID, now: datetime,
                      subscribed: bool) -> Outgoing:
        name = CalendarEvent.JOB_SUBSCRIBED if subscribed else CalendarEvent.JOB_UNSUBSCRIBED
        return Outgoing(self._topics.job_events, str(calendar.id), name, {
            "calendar_id": str(calendar.id), "version": calendar.version, "at": now,
            "job_id": str(job_id)})

    def _publication(self, calendar: Calendar, job_id: UUID, now: datetime,
                     by_reference: bool = False) -> Outgoing:
        """To a follower: the calendar with its days (the answer to its subscription), or
        by reference (an update: about 100 bytes and the names, whatever the days)."""
        return relays.calendar_published(
            self._topics, job_id, calendar.id, calendar.tenant, calendar.name,
            calendar.version, True,
            [] if by_reference else exclusions_out(calendar.exclusions), now,
            by_reference=by_reference)

    # -- the calendar's side: commands ---------------------------------------------------
    @staticmethod
    def _request(command: CalendarCommand) -> Request:
        # Keyed by the calendar's id (derived from its tenant and name).
        return Request.of(command)

    def _answered_before(self, request: Request, cycle: Cycle) -> bool:
        answered = cycle.answered.get(request.key)
        stored = (None if answered is not None
                  else self._store.request(request.job_id, request.request_id))
        earlier = earlier_outcome(request, answered, stored)
        if earlier is not None:
            self._answer(request, earlier, cycle)
        return earlier is not None

    def _answer(self, request: Request, outcome: Outcome, cycle: Cycle,
                applied_at: datetime | None = None) -> None:
        """Replies; with `applied_at` the request id is taken on the calendar's id, in the
        transaction of its events (JobRequestApplied, as for a job's command)."""
        if request.key not in cycle.answered:
            cycle.answered[request.key] = Answered(request, outcome)
            if applied_at is not None and outcome.job_version is not None:
                cycle.replies.append(messages.request_applied(
                    self._topics, request.job_id, outcome.job_version, request.request_id,
                    request.command, request.digest, applied_at))
        cycle.replies.append(messages.reply(
            self._topics, request.request_id, outcome.ok, outcome.code, outcome.message,
            outcome.job_id, outcome.job_version, request.correlation_id, outcome.field))

    def _emit(self, calendar: Calendar, cycle: Cycle) -> None:
        for event in calendar.collect_events():
            name, out = self._records.to_record(event)
            cycle.replies.append(Outgoing(self._topics.job_events, str(calendar.id), name, out))

    def _create(self, command: CreateCalendar, now: datetime, cycle: Cycle) -> None:
        request = self._request(command)
        if self._answered_before(request, cycle):
            return
        name = str(command.name)
        if self._calendar(request.job_id, cycle) is not None:
            self._answer(request, Outcome(ok=False, code="ALREADY_EXISTS", field="name",
                                          message=f"calendar {name!r} already exists"), cycle)
            return
        try:
            calendar = Calendar.create(
                str(command.tenant), name, str(command.description or ""),
                exclusions_in(command.exclusions, "exclusions"), request.request_id, now)
        except DomainError as exc:
            self._answer(request, Outcome.refused(exc), cycle)
            return
        cycle.calendars[calendar.id] = calendar
        self._emit(calendar, cycle)
        self._answer(request, Outcome(ok=True, job_id=calendar.id, job_version=calendar.version),
                     cycle, applied_at=now)

    def _update(self, command: UpdateCalendar, now: datetime, cycle: Cycle) -> None:
        request = self._request(command)
        if self._answered_before(request, cycle):
            return
        name = str(command.name)
        calendar = self._calendar(request.job_id, cycle)
        if calendar is None or calendar.tenant != str(command.tenant):
            self._answer(request, Outcome(ok=False, code="NOT_FOUND", field="name",
                                          message=f"calendar {name!r} not found"), cycle)
            return
        try:
            calendar.update(str(command.description or ""),
                            exclusions_in(command.exclusions, "exclusions"),
                            request.request_id, now,
                            expected_version=int(command.expected_version))
        except StaleVersion as exc:
            self._answer(request, Outcome.refused(exc, field="expected_version"), cycle)
            return
        except DomainError as exc:
            self._answer(request, Outcome.refused(exc), cycle)
            return
        self._emit(calendar, cycle)
        # Bounded by MAX_SUBSCRIBERS (invariant 10): at most 10,000 messages by reference, of
        # about 100 bytes and the names; each job's owner applies the version once, lazily.
        for job_id in sorted(calendar.subscribers):
            cycle.relays.append(self._publication(calendar, job_id, now, by_reference=True))
        self._answer(request, Outcome(ok=True, job_id=calendar.id, job_version=calendar.version),
                     cycle, applied_at=now)
