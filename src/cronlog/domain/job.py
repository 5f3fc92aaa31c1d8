"""The Job aggregate: a spec, a status and the next time it is due."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import event

from cronlog.domain.aggregate import CronlogAggregate
from cronlog.domain.errors import InvalidSpec, JobNotActive, StaleVersion
from cronlog.domain.policies import MisfirePolicy
from cronlog.domain.schedule import FireTime, Schedule
from cronlog.domain.spec import JobSpec, validate_spec

if TYPE_CHECKING:
    from cronlog.domain.run import Run

ACTIVE = "active"
PAUSED = "paused"
COMPLETED = "completed"
DELETED = "deleted"


def first_fire_time(spec: JobSpec, schedule: Schedule, at: datetime) -> FireTime | None:
    """A cron job first fires strictly after its creation; a one-off fires at its time, at
    once if that time has passed."""
    if spec.at is not None:
        if spec.end_at is not None and spec.at > spec.end_at:
            return None
        if spec.start_at is not None and spec.at < spec.start_at:
            return None
        return spec.at
    return schedule.next_fire_after(at)


class Job(CronlogAggregate):
    spec: JobSpec
    status: str
    next_fire_at: FireTime | None
    last_fired_at: FireTime | None

    @staticmethod
    def create_id(job_id: UUID, **_: Any) -> UUID:
        return job_id

    @event("JobCreated")
    def __init__(self, job_id: UUID, spec: JobSpec, request_id: str | None,
                 next_fire_at: FireTime | None, timestamp: datetime) -> None:
        self.spec = spec
        self.status = ACTIVE if next_fire_at is not None else COMPLETED
        self.next_fire_at = next_fire_at
        self.last_fired_at = None

    @classmethod
    def create(cls, job_id: UUID, spec: JobSpec, request_id: str | None, at: datetime) -> Job:
        spec = validate_spec(spec)
        next_fire_at = first_fire_time(spec, spec.schedule(), at)
        return cls(job_id=job_id, spec=spec, request_id=request_id, next_fire_at=next_fire_at,
                   timestamp=at)

    @property
    def schedule(self) -> Schedule:
        cached: Schedule | None = self.__dict__.get("_schedule")
        if cached is None:
            cached = self.spec.schedule()
            self.__dict__["_schedule"] = cached
        return cached

    def fire(self, now: datetime) -> Run:
        """Creates the run of the job's current fire time and advances to the next one."""
        from cronlog.domain.run import Run

        if self.status != ACTIVE or self.next_fire_at is None:
            raise JobNotActive(f"job {self.id} is {self.status} and has no fire time")
        return self._advance_past(Run.schedule(self, self.next_fire_at, "schedule", at=now),
                                  now)

    def miss(self, reason: str, now: datetime) -> Run:
        """Records the job's current fire time as a missed run and advances past it."""
        from cronlog.domain.run import Run

        if self.status != ACTIVE or self.next_fire_at is None:
            raise JobNotActive(f"job {self.id} is {self.status} and has no fire time")
        return self._advance_past(Run.missed(self, self.next_fire_at, reason, at=now), now)

    def fire_due(self, now: datetime, horizon: datetime, catch_up_window: timedelta,
                 limit: int = 1000) -> list[Run]:
        """Invariant 5: every fire time up to the horizon is run or recorded as missed.

        Fire times less than catch_up_window late are simply run late (a scheduler failover
        takes seconds). Older ones follow the misfire policy: RUN_ALL runs them all,
        RUN_LATEST runs the latest and records the others as missed, SKIP records them all.
        At most `limit` per call; the owner's next cycle goes on from there.
        """
        runs: list[Run] = []
        misfired_before = now - catch_up_window
        policy = self.spec.misfire_policy
        while (len(runs) < limit and self.status == ACTIVE and self.next_fire_at is not None
               and self.next_fire_at <= horizon):
            if self.next_fire_at >= misfired_before or policy == MisfirePolicy.RUN_ALL:
                runs.append(self.fire(now))
                continue
            following = self.schedule.next_fire_after(self.next_fire_at)
            latest = following is None or following >= misfired_before
            if policy == MisfirePolicy.RUN_LATEST and latest:
                runs.append(self.fire(now))
            else:
                runs.append(self.miss(f"misfired: more than {catch_up_window} late "
                                      f"(misfire policy {policy})", now))
        return runs

    def _advance_past(self, run: Run, now: datetime) -> Run:
        fired_at = run.scheduled_at
        next_fire_at = self.schedule.next_fire_after(fired_at)
        self._advance(fired_at=fired_at, run_id=run.id, next_fire_at=next_fire_at,
                      timestamp=now)
        if next_fire_at is None:
            self._complete(timestamp=now)
        return run

    @event("JobFireAdvanced")
    def _advance(self, fired_at: FireTime, run_id: UUID, next_fire_at: FireTime | None,
                 timestamp: datetime) -> None:
        self.last_fired_at = fired_at
        self.next_fire_at = next_fire_at

    @event("JobCompleted")
    def _complete(self, timestamp: datetime) -> None:
        self.status = COMPLETED
        self.next_fire_at = None

    def pause(self, request_id: str | None, at: datetime) -> None:
        if self.status != ACTIVE:
            raise JobNotActive(f"job {self.id} is {self.status}, not active")
        self._paused(request_id=request_id, timestamp=at)

    @event("JobPaused")
    def _paused(self, request_id: str | None, timestamp: datetime) -> None:
        self.status = PAUSED

    def resume(self, request_id: str | None, at: datetime) -> None:
        if self.status != PAUSED:
            raise JobNotActive(f"job {self.id} is {self.status}, not paused")
        # Fire times that passed while paused are not dropped: the owner meets them as
        # overdue and handles them by the misfire policy.
        if self.last_fired_at is None:
            next_fire_at = first_fire_time(self.spec, self.schedule, self.created_on)
        else:
            next_fire_at = self.schedule.next_fire_after(self.last_fired_at)
        self._resumed(request_id=request_id, next_fire_at=next_fire_at, timestamp=at)

    @event("JobResumed")
    def _resumed(self, request_id: str | None, next_fire_at: FireTime | None,
                 timestamp: datetime) -> None:
        self.status = ACTIVE if next_fire_at is not None else COMPLETED
        self.next_fire_at = next_fire_at

    def trigger(self, request_id: str, at: datetime) -> Run:
        """A manual run now, outside the schedule; its id derives from the request id."""
        from cronlog.domain.ids import manual_run_id
        from cronlog.domain.run import Run

        if self.status == DELETED:
            raise JobNotActive(f"job {self.id} is deleted")
        return Run.schedule(self, at, trigger="manual", at=at,
                            run_id=manual_run_id(self.id, request_id))

    def delete(self, request_id: str | None, at: datetime) -> None:
        if self.status == DELETED:
            return
        self._deleted(request_id=request_id, timestamp=at)

    @event("JobDeleted")
    def _deleted(self, request_id: str | None, timestamp: datetime) -> None:
        self.status = DELETED
        self.next_fire_at = None

    def update(self, spec: JobSpec, request_id: str | None, at: datetime,
               expected_version: int = 0) -> None:
        """Replaces the spec; expected_version 0 means any version."""
        if self.status == DELETED:
            raise JobNotActive(f"job {self.id} is deleted")
        if expected_version and expected_version != self.version:
            raise StaleVersion(f"job {self.id} is at version {self.version}, "
                               f"not {expected_version}")
        spec = validate_spec(spec)
        if spec.tenant != self.spec.tenant:
            raise InvalidSpec("spec.tenant", "a job cannot move to another tenant")
        after = max(at, self.last_fired_at) if self.last_fired_at else at
        self._updated(spec=spec, request_id=request_id,
                      next_fire_at=spec.schedule().next_fire_after(after), timestamp=at)

    @event("JobUpdated")
    def _updated(self, spec: JobSpec, request_id: str | None, next_fire_at: FireTime | None,
                 timestamp: datetime) -> None:
        self.spec = spec
        self.__dict__.pop("_schedule", None)
        if self.status == ACTIVE:
            self.next_fire_at = next_fire_at
