"""What the api reads of a tenant's calendars, and the snapshot of one that a CreateJob /
UpdateJob command carries (issue 20, docs/calendars.md).

The snapshot lets a job created on a calendar skip the calendar's days from its first fire
time on, before the calendar's owner has heard of the job; later versions reach the job
through its owner (CalendarPublished)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cronlog.commands.api.ports import CalendarReader, CalendarView
from cronlog.domain.calendar import MAX_SUBSCRIBERS
from cronlog.domain.errors import DomainError
from cronlog.domain.exclusions import NO_EXCLUSIONS, Exclusions
from cronlog.domain.limits import TenantLimitReached
from cronlog.domain.spec import JobSpec


class CalendarMissing(DomainError):
    """A job or a preview names a calendar its tenant does not have (FAILED_PRECONDITION at
    the api: the request is sound, the state it needs is not there)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def date_ranges_record(exclusions: Exclusions) -> list[dict[str, Any]]:
    """Exclusions as the Avro DateRange array."""
    return [{"first": r.first, "last": r.last} for r in exclusions.ranges]


@dataclass(frozen=True)
class CalendarSnapshot:
    version: int = 0
    exclusions: Exclusions = NO_EXCLUSIONS

    def fields(self) -> dict[str, Any]:
        """The command fields CreateJob and UpdateJob carry it in (commands/messages.py)."""
        return {"calendar_version": self.version,
                "calendar_exclusions": tuple(date_ranges_record(self.exclusions))}


def named_calendar(reader: CalendarReader, tenant: str, name: str, field: str) -> CalendarView:
    """The tenant's calendar of this name, or CalendarMissing naming `field`."""
    found = reader.calendar(tenant, name)
    if found is None:
        raise CalendarMissing(field, f"{field}: calendar {name!r} not found in tenant "
                                     f"{tenant!r}")
    return found


def calendar_snapshot(reader: CalendarReader | None, spec: JobSpec,
                      following: str | None = None) -> CalendarSnapshot:
    """The calendar a validated spec names, as it is now (an empty snapshot when it names
    none). Without a reader a spec naming a calendar is refused, never sent unchecked.
    `following`: the calendar the job follows already, if any; a job joining a calendar
    that has its most followers is refused here rather than by the calendar's owner, after
    the job was written (a guard: two jobs racing for the last place may both pass)."""
    if spec.calendar is None:
        return CalendarSnapshot()
    if reader is None:
        raise CalendarMissing("spec.calendar", "this api cannot read calendars")
    found = named_calendar(reader, spec.tenant, spec.calendar, "spec.calendar")
    if found.subscribers >= MAX_SUBSCRIBERS and following != spec.calendar:
        raise TenantLimitReached(f"calendar {spec.calendar!r} is followed by "
                                 f"{found.subscribers} jobs, its most")
    return CalendarSnapshot(found.version, found.exclusions)
