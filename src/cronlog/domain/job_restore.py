"""Restoring a job (issue 38, docs/lifecycle.md, "Restore"): a deleted job brought back, or
a job rolled back, with the spec it had at an earlier version of its own. It is a new event
that names the version it restores (JobRestored): nothing in the log is rewritten, and the
audit and `cronlog verify` show it as what it is.

A base class of the Job aggregate, so that JobRestored stays the Job's event.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from eventsourcing.domain import event

from cronlog.domain.aggregate import CronlogAggregate
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import AppliedCalendar, excluded_by, named_calendar, newest
from cronlog.domain.fire_times import first_fire_time, searched
from cronlog.domain.job_status import ACTIVE, COMPLETED, DELETED
from cronlog.domain.schedule import FireTime, Schedule
from cronlog.domain.spec import JobSpec, validate_spec

# The statuses a restore brings a job back from: it gets its fire times again.
REVIVED_FROM = (DELETED, COMPLETED)


def restored_next_fire_time(status: str, spec: JobSpec, schedule: Schedule,
                            last_fired_at: datetime | None, created_on: datetime,
                            at: datetime, skip_missed: bool) -> FireTime | None:
    """The next fire time a job restored at `at` from `status` has under `schedule`.

    A job brought back (deleted or completed) goes on from its last fire time, so the fire
    times it missed meanwhile are overdue and meet its misfire policy, as a resumed job's
    do; with `skip_missed` it goes on from now, and they are not its fire times. A job
    rolled back (active or paused) goes on from now, as after an update."""
    if status in REVIVED_FROM and not skip_missed:
        if last_fired_at is None:
            return first_fire_time(spec, schedule, created_on)
        return schedule.next_fire_after(last_fired_at)
    since = max(at, last_fired_at) if last_fired_at is not None else at
    return schedule.next_fire_after(since)


def status_after_restore(status: str, spec: JobSpec, next_fire_at: FireTime | None) -> str:
    """A job brought back is active while it has fire times (a dependent one always);
    a job rolled back keeps its status."""
    if status not in REVIVED_FROM:
        return status
    return ACTIVE if next_fire_at is not None or spec.after is not None else COMPLETED


class JobRestore(CronlogAggregate):
    if TYPE_CHECKING:  # the Job's, declared there (an annotation here would be an event field)
        spec: JobSpec
        status: str
        next_fire_at: FireTime | None
        last_fired_at: FireTime | None
        calendar: AppliedCalendar | None
        revision: int

        def _revise(self) -> None: ...

        def apply_calendar(self, calendar: AppliedCalendar, request_id: str | None,
                           at: datetime) -> bool: ...

    def restore_to(self, version: int, spec: JobSpec, request_id: str | None, at: datetime,
                   skip_missed: bool = False, calendar: AppliedCalendar | None = None) -> None:
        """Gives the job `spec`, the one it had at its `version` (read by the api from the
        job's spec history), and brings it back if deleted or completed. `calendar`: the
        api's snapshot of the calendar the spec names."""
        if not 1 <= version <= self.revision:
            raise InvalidSpec("version", f"job {self.id} has versions 1 to {self.revision}, "
                                         f"not {version}")
        spec = validate_spec(spec)
        if spec.tenant != self.spec.tenant:
            raise InvalidSpec("spec.tenant", "a job cannot move to another tenant")
        if spec.after is not None and self.id in spec.after.job_ids:
            raise InvalidSpec("spec.after.job_ids", "a job cannot run after itself")
        calendar = newest(self.calendar, named_calendar(spec.calendar, calendar))
        schedule = spec.schedule(excluded_by(calendar))
        next_fire_at = searched(lambda: restored_next_fire_time(
            self.status, spec, schedule, self.last_fired_at, self.created_on, at,
            skip_missed), spec, calendar)
        self._restored(spec=spec, restored_version=version, request_id=request_id,
                       status=status_after_restore(self.status, spec, next_fire_at),
                       next_fire_at=next_fire_at, skip_missed=skip_missed, timestamp=at)
        if calendar is not None:
            self.apply_calendar(calendar, request_id, at)

    @event("JobRestored")
    def _restored(self, spec: JobSpec, restored_version: int, request_id: str | None,
                  status: str, next_fire_at: FireTime | None, skip_missed: bool,
                  timestamp: datetime) -> None:
        self._revise()
        self.spec = spec
        self.status = status
        if self.calendar is not None and self.calendar.name != spec.calendar:
            self.calendar = None  # the spec names another calendar, or none
        self.__dict__.pop("_schedule", None)
        self.next_fire_at = next_fire_at
