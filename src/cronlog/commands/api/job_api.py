"""The api's application logic: validate, send the command to the owner, read the result.

The api is stateless: it never writes state itself. Commands go to the inbox; the owner of
the job's partition answers; reads come from the projections.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from cronlog.commands import messages
from cronlog.commands.api.calendar_snapshot import calendar_snapshot
from cronlog.commands.api.notify_check import check_notify_channels
from cronlog.commands.api.ports import (
    CalendarReader,
    ChannelReader,
    JobReader,
    QueueCatalog,
    SpecHistory,
    SpecRecords,
    UpstreamReader,
)
from cronlog.commands.api.upstream_check import check_upstreams
from cronlog.commands.messages import CommandBus, JobCommand
from cronlog.domain.bounds import require_interval
from cronlog.domain.catalogue import Command
from cronlog.domain.errors import (
    DomainError,
    InvalidSpec,
    JobNotFound,
    RunNotFound,
    SpecNotKept,
)
from cronlog.domain.exclusions import NO_EXCLUSIONS, AppliedCalendar
from cronlog.domain.fire_times import backfill_fire_times
from cronlog.domain.ids import backfill_run_id, job_id_for_request, manual_run_id
from cronlog.domain.limits import TenantLimits
from cronlog.domain.schedule import Schedule
from cronlog.domain.spec import JobSpec, check_search_cost, validate_spec
from cronlog.ports import Clock


class CommandRejected(DomainError):
    """The owner refused a command; status is the gRPC status name it answered, field the
    request field it is about when the owner named one (e.g. request_id for an id reused
    with another request)."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = code
        self.field = field


class NotVisibleYet(DomainError):
    """The owner applied the command, but the job's row did not show within the
    read-your-write wait (its owner is behind on a loaded machine). UNAVAILABLE, not
    NOT_FOUND: the job exists, and the same request again (same request id) answers it."""

    status = "UNAVAILABLE"


def require_ok(reply: Mapping[str, Any]) -> None:
    """Raises CommandRejected unless the owner's reply says the command was applied."""
    if not reply["ok"]:
        field = reply.get("error_field")
        raise CommandRejected(str(reply.get("error_code") or "INTERNAL"),
                              str(reply.get("error_message") or "command rejected"),
                              str(field) if field else None)


# The commands on a job that carry nothing but the job (ChangeJob's names).
PLAIN_JOB_COMMANDS: dict[str, type[JobCommand]] = {
    Command.PAUSE_JOB: messages.PauseJob, Command.RESUME_JOB: messages.ResumeJob,
    Command.DELETE_JOB: messages.DeleteJob}


def _schedule_of(row: Any, spec_of: Any) -> Schedule:
    """A job's fire times as its owner computes them: without the days of the calendar it
    follows as last applied (issue 20), so the run ids the api returns are the owner's."""
    applied: AppliedCalendar | None = getattr(row, "calendar", None)
    schedule: Schedule = spec_of(row).schedule(applied.effective if applied else NO_EXCLUSIONS)
    return schedule


def require_request_id(request_id: str) -> str:
    if not request_id or len(request_id) > 200:
        raise InvalidSpec("request_id", "a request id of 1 to 200 characters is required")
    return request_id


@dataclass
class JobApi:
    bus: CommandBus
    jobs: JobReader
    queues: QueueCatalog
    specs: SpecRecords
    clock: Clock
    reply_timeout: float = 15.0
    # How long to wait for the projection to show what the owner just committed.
    read_your_write_timeout: float = 5.0
    limits: TenantLimits = field(default_factory=TenantLimits)
    # Reads the tenant's jobs' `after`; without it a job with `after` is refused, never
    # sent unchecked.
    upstreams: UpstreamReader | None = None
    # Reads the tenant's calendars for the snapshot a job naming one carries; without it a
    # job naming a calendar is refused.
    calendars: CalendarReader | None = None
    # Reads the tenant's channels a job's notify rule names; without it a job with a notify
    # rule is refused.
    channels: ChannelReader | None = None
    # Reads the specs a job had (RestoreJob); without it a restore is refused.
    spec_history: SpecHistory | None = None

    def check_notify(self, spec: JobSpec, known: dict[str, frozenset[str]] | None = None) -> None:
        """The channels the job's notify rule names are the tenant's (docs/alerts.md)."""
        if spec.notify is None:
            return
        if self.channels is None:
            raise CommandRejected("UNAVAILABLE", "this api cannot check alert channels",
                                  "spec.notify")
        check_notify_channels(spec, self.channels, known)

    def check_after(self, job_id: UUID, spec: JobSpec) -> None:
        """Upstreams exist in the tenant and close no cycle (docs/dependencies.md)."""
        if spec.after is None:
            return
        if self.upstreams is None:
            raise CommandRejected("UNAVAILABLE", "this api cannot check job dependencies",
                                  "spec.after")
        check_upstreams(job_id, spec.tenant, spec.after, self.upstreams)

    def create_job(self, request_id: str, spec: JobSpec) -> Any:
        request_id = require_request_id(request_id)
        spec = validate_spec(spec)
        job_id = job_id_for_request(spec.tenant, request_id)
        retried = self.jobs.get(job_id) is not None
        if not retried:
            # Checked here, not by the owners: a tenant's jobs live on every partition. Two
            # creates racing at the limit may both pass; the limit is a guard, not a quota.
            self.limits.check_new_job(spec.tenant, self.jobs.count_jobs(spec.tenant))
        self.queues.check(spec)
        if not retried:
            # A retry gets the first outcome from the owner, whatever the graph is now.
            self.check_after(job_id, spec)
            self.check_notify(spec)
        # A retried create's job follows its calendar already.
        snapshot = calendar_snapshot(self.calendars, spec, spec.calendar if retried else None)
        # Invariant 12: the first search the owner will make, with the calendar as it is.
        check_search_cost(spec, snapshot.exclusions, self.clock.now())
        return self._decided(messages.CreateJob(
            request_id=request_id, job_id=job_id, at=self.clock.now(),
            spec=self.specs.to_record(spec), **snapshot.fields()))

    def change_job(self, name: str, request_id: str, job_id: UUID) -> Any:
        """Pauses, resumes or deletes a job; returns the job as the owner left it."""
        kind = PLAIN_JOB_COMMANDS.get(name)
        if kind is None:
            raise ValueError(f"{name} is not a command without fields of its own")
        return self._decided(kind(request_id=require_request_id(request_id), job_id=job_id,
                                  at=self.clock.now()))

    def _decided(self, command: JobCommand) -> Any:
        """Sends a command on a job; returns the job as the owner left it."""
        reply = self.bus.send(command, self.reply_timeout)
        require_ok(reply)
        return self.wait_for_job(command.job_id, int(reply.get("job_version") or 1))

    def update_job(self, request_id: str, job_id: UUID, expected_version: int,
                   spec: JobSpec) -> Any:
        if expected_version < 0:
            raise InvalidSpec("expected_version", "must not be negative")
        spec = validate_spec(spec)
        self.queues.check(spec)
        self.check_after(job_id, spec)
        self.check_notify(spec)
        current: AppliedCalendar | None = getattr(self.jobs.get(job_id), "calendar", None)
        snapshot = calendar_snapshot(self.calendars, spec, current.name if current else None)
        check_search_cost(spec, snapshot.exclusions, self.clock.now())
        return self._decided(messages.UpdateJob(
            request_id=require_request_id(request_id), job_id=job_id, at=self.clock.now(),
            expected_version=expected_version, spec=self.specs.to_record(spec),
            **snapshot.fields()))

    def restore_job(self, request_id: str, job_id: UUID, version: int,
                    skip_missed: bool = False) -> Any:
        """Gives the job the spec it had at `version`, bringing it back if deleted or
        completed (docs/lifecycle.md, "Restoring a job"): the spec as read from the job's
        spec history meets every check a create's does now (queue, upstreams, channels,
        the tenant's job limit for a deleted job, the search's cost)."""
        request_id = require_request_id(request_id)
        job = self.jobs.get(job_id)
        if job is None:
            raise JobNotFound(f"job {job_id} not found")
        current = int(getattr(job, "revision", 0) or job.version)
        if not 1 <= version <= current:
            raise InvalidSpec("version", f"job {job_id} has versions 1 to {current}, "
                                         f"not {version}")
        if self.spec_history is None:
            raise CommandRejected("UNAVAILABLE", "this api cannot read the specs jobs had",
                                  "version")
        spec = self.spec_history.spec_at(job_id, version)
        if spec is None:
            raise SpecNotKept(f"job {job_id}: the spec it had at version {version} is not "
                              "kept (replaced before this deployment kept specs; `cronlog "
                              "replay --rebuild` fills the history from the log)")
        spec = validate_spec(spec)
        self.queues.check(spec)
        if job.status == "deleted":
            self.limits.check_new_job(spec.tenant, self.jobs.count_jobs(spec.tenant))
        self.check_after(job_id, spec)
        self.check_notify(spec)
        held: AppliedCalendar | None = (getattr(job, "calendar", None)
                                        if job.status != "deleted" else None)
        snapshot = calendar_snapshot(self.calendars, spec, held.name if held else None)
        check_search_cost(spec, snapshot.exclusions, self.clock.now())
        return self._decided(messages.RestoreJob(
            request_id=request_id, job_id=job_id, at=self.clock.now(),
            restored_version=version, skip_missed=skip_missed,
            spec=self.specs.to_record(spec), **snapshot.fields()))

    def trigger_job(self, request_id: str, job_id: UUID, cascade: bool = False) -> UUID:
        """Starts a manual run now; returns its run id (derived from the request id). With
        `cascade` the job's dependents follow the run, under the request id."""
        self._decided(messages.TriggerJob(request_id=require_request_id(request_id),
                                          job_id=job_id, at=self.clock.now(), cascade=cascade))
        return manual_run_id(job_id, request_id)

    def backfill_job(self, request_id: str, job_id: UUID, after: datetime, until: datetime,
                     spec_of: Any, cascade: bool = False) -> list[UUID]:
        """Runs for the job's fire times in (after, until]; returns their run ids.

        The interval is checked against the job's current schedule before anything is sent,
        so a bad one is refused without a write; `spec_of` reads a job row's spec. With
        `cascade` the job's dependents follow the runs, under the request id.
        """
        request_id = require_request_id(request_id)
        after, until = require_interval(after, until)
        job = self.jobs.get(job_id)
        if job is None or job.status == "deleted":
            raise JobNotFound(f"job {job_id} not found")
        backfill_fire_times(_schedule_of(job, spec_of), after, until, self.clock.now())
        row = self._decided(messages.BackfillJob(
            request_id=request_id, job_id=job_id, at=self.clock.now(), after=after,
            until=until, cascade=cascade))
        times = backfill_fire_times(_schedule_of(row, spec_of), after, until, self.clock.now())
        return [backfill_run_id(job_id, request_id, t) for t in times]

    def cancel_run(self, request_id: str, run_id: UUID) -> Any:
        """Cancels a run that has not ended; returns its state row once cancelled."""
        request_id = require_request_id(request_id)
        run = self.jobs.run(run_id)
        if run is None:
            raise RunNotFound(f"run {run_id} not found")
        reply = self.bus.send(messages.CancelRun(
            request_id=request_id, job_id=run.job_id, run_id=run_id, at=self.clock.now()),
            self.reply_timeout)
        require_ok(reply)
        deadline = time.monotonic() + self.read_your_write_timeout
        while True:
            row = self.jobs.run(run_id)
            if (row is not None and row.status == "cancelled") or time.monotonic() >= deadline:
                return row
            time.sleep(0.02)

    def redrive_run(self, request_id: str, run_id: UUID, requested_by: str = "") -> Any:
        """Gives a dead-lettered run a new series of attempts; returns its state row once
        the owner has applied the re-drive (or as it stands after the read-your-write wait).
        `requested_by` names the caller for the audit."""
        request_id = require_request_id(request_id)
        run = self.jobs.run(run_id)
        if run is None:
            raise RunNotFound(f"run {run_id} not found")
        reply = self.bus.send(messages.RedriveRun(
            request_id=request_id, job_id=run.job_id, run_id=run_id, at=self.clock.now(),
            requested_by=requested_by), self.reply_timeout)
        require_ok(reply)
        deadline = time.monotonic() + self.read_your_write_timeout
        while True:
            row = self.jobs.run(run_id)
            if (row is not None and row.status != "dead_lettered") \
                    or time.monotonic() >= deadline:
                return row
            time.sleep(0.02)

    def wait_for_run(self, run_id: UUID) -> Any:
        """The run's state row once the owner has applied it, or None if not yet visible."""
        deadline = time.monotonic() + self.read_your_write_timeout
        while True:
            run = self.jobs.run(run_id)
            if run is not None or time.monotonic() >= deadline:
                return run
            time.sleep(0.02)

    def wait_for_job(self, job_id: UUID, version: int) -> Any:
        deadline = time.monotonic() + self.read_your_write_timeout
        while True:
            job = self.jobs.get(job_id)
            if job is not None and job.version >= version:
                return job
            if time.monotonic() >= deadline:
                if job is not None:
                    return job
                raise NotVisibleYet(f"job {job_id} was accepted but is not visible yet; send "
                                    "the same request again (same request id) to read it")
            time.sleep(0.02)
