"""A job following a named calendar (issue 20, docs/calendars.md): the version of the
calendar it applies, and its next fire time searched again under it.

A base class of the Job aggregate, so that JobCalendarApplied stays the Job's event.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from eventsourcing.domain import event

from cronlog.domain.aggregate import CronlogAggregate
from cronlog.domain.exclusions import AppliedCalendar, Exclusions, recompute_from
from cronlog.domain.fire_times import searched
from cronlog.domain.job_status import ACTIVE
from cronlog.domain.schedule import FireTime

if TYPE_CHECKING:
    from cronlog.domain.spec import JobSpec


class CalendarFollower(CronlogAggregate):
    if TYPE_CHECKING:  # the Job's, declared there (an annotation here would be an event field)
        spec: JobSpec
        status: str
        next_fire_at: FireTime | None
        last_fired_at: FireTime | None
        calendar: AppliedCalendar | None

        def _complete(self, timestamp: datetime) -> None: ...

    def apply_calendar(self, calendar: AppliedCalendar, request_id: str | None,
                       at: datetime) -> bool:
        """Follows a version of the calendar the spec names, if newer than the one held;
        the next fire time is searched again (exclusions.recompute_from)."""
        if calendar.name != self.spec.calendar or not calendar.supersedes(self.calendar):
            return False
        schedule = self.spec.schedule(calendar.effective)
        next_fire_at = self.next_fire_at
        if self.status == ACTIVE:
            since = recompute_from(self.last_fired_at, self.next_fire_at, at)
            next_fire_at = searched(lambda: schedule.next_fire_after(since), self.spec,
                                     calendar)
        self._calendar_applied(request_id=request_id, name=calendar.name,
                               calendar_version=calendar.version, found=calendar.found,
                               exclusions=calendar.exclusions, next_fire_at=next_fire_at,
                               timestamp=at)
        if self.status == ACTIVE and next_fire_at is None:
            self._complete(timestamp=at)
        return True

    @event("JobCalendarApplied")
    def _calendar_applied(self, request_id: str | None, name: str, calendar_version: int,
                          found: bool, exclusions: Exclusions, next_fire_at: FireTime | None,
                          timestamp: datetime) -> None:
        self.calendar = AppliedCalendar(name, calendar_version, found, exclusions)
        self.__dict__.pop("_schedule", None)
        if self.status == ACTIVE:
            self.next_fire_at = next_fire_at
