"""The commands on jobs and runs an owner decides: create, update, pause, resume, delete,
trigger, backfill, cancel a run, re-drive a dead letter. Each is applied once per (job,
request id) and answered every time; the same id with another request on the job is
refused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from uuid import UUID

from cronlog.commands import messages as command_messages
from cronlog.commands.messages import (
    BackfillJob,
    CancelRun,
    CreateJob,
    DeleteJob,
    JobCommand,
    JobSpecCommand,
    PauseJob,
    RedriveRun,
    RestoreJob,
    ResumeJob,
    TriggerJob,
    UpdateJob,
    typed,
)
from cronlog.commands.owner import owner_messages as messages
from cronlog.commands.owner.calendars import Calendars, snapshot_of
from cronlog.commands.owner.dependencies import Dependencies
from cronlog.commands.owner.owner_cycle import Cycle, Handler
from cronlog.commands.owner.ports import EventRecords, Outgoing, OwnerStore, Topics
from cronlog.commands.owner.request_ids import Answered, Outcome, Request, earlier_outcome
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.domain.catalogue import Command
from cronlog.domain.errors import DomainError
from cronlog.domain.ids import manual_run_id
from cronlog.domain.job import Job
from cronlog.domain.job_status import DELETED
from cronlog.domain.spec import JobSpec

# The commands keyed by a job, whose jobs and stored requests a cycle reads at once
# (commands/messages.py: the JobCommand classes).
ON_JOBS = command_messages.ON_JOBS


class JobCommands:
    def __init__(self, store: OwnerStore, records: EventRecords, topics: Topics,
                 dependencies: Dependencies, calendars: Calendars,
                 queues: DeclaredQueues | None = None) -> None:
        """queues: the queues and handlers each tenant may use, checked again here (the
        api checks them first): a job on an undeclared queue would be dispatched to a
        topic that does not exist, and every transaction of its partition would fail.
        None: not checked (tests of other things)."""
        self._store = store
        self._queues = queues
        self._records = records
        self._topics = topics
        self._dependencies = dependencies
        self._calendars = calendars

    def handlers(self) -> dict[str, Handler]:
        # Dispatched by class: each record becomes its command (commands/messages.py).
        return {
            Command.CREATE_JOB: typed(CreateJob, self._create_job),
            Command.UPDATE_JOB: typed(UpdateJob, self._update_job),
            Command.PAUSE_JOB: typed(PauseJob, self._pause_job),
            Command.RESUME_JOB: typed(ResumeJob, self._resume_job),
            Command.DELETE_JOB: typed(DeleteJob, self._delete_job),
            Command.TRIGGER_JOB: typed(TriggerJob, self._trigger_job),
            Command.BACKFILL_JOB: typed(BackfillJob, self._backfill_job),
            Command.CANCEL_RUN: typed(CancelRun, self._cancel_run),
            Command.REDRIVE_RUN: typed(RedriveRun, self._redrive_run),
            Command.RESTORE_JOB: typed(RestoreJob, self._restore_job),
        }

    def _reply(self, request_id: str, ok: bool, code: str | None = None,
               message: str | None = None, job_id: UUID | None = None,
               job_version: int | None = None, correlation_id: str | None = None,
               error_field: str | None = None, key: str | None = None,
               repeated: bool = False) -> Outgoing:
        return messages.reply(self._topics, request_id, ok, code, message, job_id, job_version,
                              correlation_id, error_field, key, repeated)

    def _answered_before(self, request: Request, cycle: Cycle) -> bool:
        """Answers a request whose id the job has seen already, as the first time."""
        answered = cycle.answered.get(request.key)
        stored = (None if answered is not None
                  else cycle.stored_request(request.job_id, request.request_id))
        earlier = earlier_outcome(request, answered, stored)
        if earlier is None:
            return False
        self._answer(request, replace(earlier, repeated=earlier.ok), cycle)
        return True

    def _answer(self, request: Request, outcome: Outcome, cycle: Cycle,
                applied_at: datetime | None = None) -> None:
        """Replies to the request. With `applied_at`, the request changed something: its id
        is taken on the job (JobRequestApplied), in the same transaction as its events."""
        if request.key not in cycle.answered:
            cycle.answered[request.key] = Answered(request, outcome)
            if applied_at is not None and outcome.ok and outcome.job_version is not None:
                cycle.replies.append(messages.request_applied(
                    self._topics, request.job_id, outcome.job_version, request.request_id,
                    request.command, request.digest, applied_at))
        cycle.replies.append(self._reply(
            request.request_id, outcome.ok, outcome.code, outcome.message, outcome.job_id,
            outcome.job_version, correlation_id=request.correlation_id,
            error_field=outcome.field, key=str(request.job_id), repeated=outcome.repeated))

    def _create_job(self, command: CreateJob, now: datetime, cycle: Cycle) -> None:
        request = Request.of(command)
        if self._answered_before(request, cycle):
            return
        job_id = request.job_id
        existing = cycle.job(job_id)
        if existing is not None:
            # No request recorded, yet the job its id derives from exists: a retry of a
            # create older than recorded requests; answer as the first time.
            self._answer(request, Outcome(ok=True, job_id=job_id, job_version=existing.version,
                                          repeated=True), cycle)
            return
        try:
            spec = self._records.spec_from_record(command.spec)
            self._check(spec)
            job = Job.create(job_id=job_id, spec=spec, request_id=request.request_id, at=now,
                             calendar=snapshot_of(command, spec.calendar))
        except DomainError as exc:
            self._answer(request, Outcome.refused(exc), cycle)
            return
        cycle.jobs[job_id] = job
        self._dependencies.respec(job, None, now, cycle)
        self._calendars.respec(job, None, now, cycle)
        self._answer(request, Outcome(ok=True, job_id=job_id, job_version=job.version), cycle,
                     applied_at=now)

    def _change_job(self, command: JobCommand, now: datetime, cycle: Cycle,
                    change: Callable[[Job, str], None], allow_deleted: bool = False) -> None:
        """A command on an existing job: applied once per (job, request id), answered every
        time; the same id with another request on the job is refused."""
        request = Request.of(command)
        if self._answered_before(request, cycle):
            return
        job_id = request.job_id
        job = cycle.job(job_id)
        applied = False
        if job is None or (job.status == "deleted" and not allow_deleted):
            outcome = Outcome(ok=False, code="NOT_FOUND", message=f"job {job_id} not found")
        else:
            version, runs = job.version, len(cycle.runs)
            try:
                change(job, request.request_id)
                outcome = Outcome(ok=True, job_id=job_id, job_version=job.version)
                # A request that changed nothing (a delete of a deleted job) takes no id.
                applied = job.version != version or len(cycle.runs) != runs
            except DomainError as exc:
                outcome = Outcome.refused(exc)
        self._answer(request, outcome, cycle, applied_at=now if applied else None)

    def _update_job(self, command: UpdateJob, now: datetime, cycle: Cycle) -> None:
        def update(job: Job, spec: JobSpec, request_id: str) -> None:
            job.update(spec, request_id, now, expected_version=int(command.expected_version),
                       calendar=snapshot_of(command, spec.calendar))

        self._change_job(command, now, cycle, self._respecced(command, now, cycle, update,
                                                              "updated"))

    def _restore_job(self, command: RestoreJob, now: datetime, cycle: Cycle) -> None:
        """An earlier version's spec given back (domain/job_restore.py); a deleted job is
        brought back: it follows its upstreams and its calendar again."""
        def restore(job: Job, spec: JobSpec, request_id: str) -> None:
            job.restore_to(int(command.restored_version), spec, request_id, now,
                           skip_missed=bool(command.skip_missed),
                           calendar=snapshot_of(command, spec.calendar))

        self._change_job(command, now, cycle, self._respecced(command, now, cycle, restore,
                                                              "restored"),
                         allow_deleted=True)

    def _respecced(self, command: JobSpecCommand, now: datetime, cycle: Cycle,
                   give: Callable[[Job, JobSpec, str], None], what: str
                   ) -> Callable[[Job, str], None]:
        """A change that gives the job the command's spec (`give`), with what follows from
        it: links to upstreams and calendars moved, runs not started dispatched again."""
        def change(job: Job, request_id: str) -> None:
            # Read inside the change: a spec the domain refuses as read is the request's
            # refusal, not a message set aside.
            spec = self._records.spec_from_record(command.spec)
            self._check(spec)
            live = job.status != DELETED  # a deleted job follows nothing
            old_queue = job.spec.queue
            before = job.spec.after if live else None
            calendar = job.spec.calendar if live else None
            if before is not None:
                cycle.fan_in(job)  # as the old `after` left it, to be re-aimed
            give(job, spec, request_id)
            self._dependencies.respec(job, before, now, cycle)
            self._calendars.respec(job, calendar, now, cycle)
            # Runs dispatched but not started would run the old spec: withdraw them (from
            # the queue they were sent to) and dispatch them again with the new one.
            for run in cycle.unfinished(job.id):
                cycle.dispatched_to.setdefault(run.id, old_queue)
                run.replace_dispatch(f"job {what} by request {request_id} before the run "
                                     "started", job.spec.timeout, now)

        return change

    def _check(self, spec: JobSpec) -> None:
        if self._queues is not None:
            self._queues.check(spec)

    def _cancel_pending(self, job: Job, reason: str, now: datetime, cycle: Cycle) -> None:
        """Cancels the job's runs whose current attempt has not started: pre-enqueued,
        held, waiting to retry, or re-dispatched by an update. Runs going now go on."""
        for run in cycle.unfinished(job.id):
            if run.status == "scheduled":
                run.cancel(reason, now)

    def _pause_job(self, command: PauseJob, now: datetime, cycle: Cycle) -> None:
        def pause(job: Job, request_id: str) -> None:
            job.pause(request_id, now)
            self._cancel_pending(job, f"job paused by request {request_id}", now, cycle)

        self._change_job(command, now, cycle, pause)

    def _resume_job(self, command: ResumeJob, now: datetime, cycle: Cycle) -> None:
        self._change_job(command, now, cycle, lambda job, rid: job.resume(rid, now))

    def _delete_job(self, command: DeleteJob, now: datetime, cycle: Cycle) -> None:
        def delete(job: Job, request_id: str) -> None:
            if job.status != "deleted":
                job.delete(request_id, now)
                self._cancel_pending(job, f"job deleted by request {request_id}", now, cycle)
                self._dependencies.respec(job, job.spec.after, now, cycle)
                self._calendars.respec(job, job.spec.calendar, now, cycle)

        self._change_job(command, now, cycle, delete, allow_deleted=True)

    def _backfill_job(self, command: BackfillJob, now: datetime, cycle: Cycle) -> None:
        def backfill(job: Job, request_id: str) -> None:
            runs = job.backfill(request_id, command.after, command.until, now,
                                cycle.unfinished(job.id), cascade=bool(command.cascade))
            for run in runs:
                cycle.runs[run.id] = run

        self._change_job(command, now, cycle, backfill)

    def _cancel_run(self, command: CancelRun, now: datetime, cycle: Cycle) -> None:
        request = Request.of(command)
        if self._answered_before(request, cycle):
            return
        run = cycle.run(command.run_id)
        if run is None or run.job_id != request.job_id:
            self._answer(request, Outcome(ok=False, code="NOT_FOUND",
                                          message=f"run {command.run_id} not found"), cycle)
            return
        cancelled = run.cancel(f"cancelled by request {request.request_id}", now)
        if cancelled is None and run.status != "cancelled":
            self._answer(request, Outcome(
                ok=False, code="FAILED_PRECONDITION",
                message=f"run {run.id} has already ended: {run.status}"), cycle)
            return
        # A retry finds the run cancelled already and gets the same answer.
        job = cycle.job(run.job_id)
        self._answer(request, Outcome(ok=True, job_id=run.job_id,
                                      job_version=job.version if job is not None else None),
                     cycle, applied_at=now if cancelled is not None else None)

    def _redrive_run(self, command: RedriveRun, now: datetime, cycle: Cycle) -> None:
        """A dead letter's new series of attempts (domain/run_redrive.py), dispatched now
        with the job's current spec. Its job must still exist; a paused job's run may be
        re-driven (asking for it is as deliberate as a trigger)."""
        request = Request.of(command)
        if self._answered_before(request, cycle):
            return
        run = cycle.run(command.run_id)
        job = cycle.job(request.job_id)
        if run is None or run.job_id != request.job_id:
            outcome = Outcome(ok=False, code="NOT_FOUND",
                              message=f"run {command.run_id} not found")
        elif job is None or job.status == "deleted":
            outcome = Outcome(ok=False, code="FAILED_PRECONDITION",
                              message=f"run {run.id}'s job {request.job_id} was deleted: "
                                      "restore or re-create the job to run it again")
        else:
            try:
                run.redrive(request.request_id, command.requested_by, job.spec.timeout, now)
            except DomainError as exc:
                self._answer(request, Outcome.refused(exc), cycle)
                return
            self._answer(request, Outcome(ok=True, job_id=job.id, job_version=job.version),
                         cycle, applied_at=now)
            return
        self._answer(request, outcome, cycle)

    def _trigger_job(self, command: TriggerJob, now: datetime, cycle: Cycle) -> None:
        def trigger(job: Job, request_id: str) -> None:
            run_id = manual_run_id(job.id, request_id)
            if run_id in cycle.runs or self._store.run(run_id) is not None:
                return  # a retried trigger: the run exists already
            run = job.trigger(request_id, now, cascade=bool(command.cascade))
            cycle.runs[run.id] = run

        self._change_job(command, now, cycle, trigger)
