"""JobServiceServicer: gRPC requests to the application layer, errors to status codes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar
from uuid import UUID

import grpc

from cronlog.commands.api.calendar_api import CalendarApi
from cronlog.commands.api.job_api import JobApi
from cronlog.commands.api.job_batch import WAVE, JobBatch, TenantTurns, batch_bus
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.domain.catalogue import Command
from cronlog.domain.errors import InvalidSpec, JobNotFound
from cronlog.domain.spec import JobSpec
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory, RunFilter, encode_page_token
from cronlog.infra.grpc import auth, calendar_rpcs, channel_rpcs, convert, create_jobs, dead_letter_rpcs
from cronlog.infra.grpc.alert_delivery_rpcs import AlertDeliveryRpcs
from cronlog.infra.grpc.error_status import abort, status_of
from cronlog.infra.grpc.job_list_filter import job_list_filter
from cronlog.infra.grpc.preview_rpc import preview_schedule
from cronlog.infra.grpc.proof_rpcs import HistoryProofRpcs
from cronlog.infra.grpc.response_size import MAX_RESPONSE_BYTES, bounded_page, bounded_run
from cronlog.infra.grpc.restore_rpcs import JobRestoreRpcs
from cronlog.infra.grpc.worker_rpcs import FleetView, job_warnings, list_workers
from cronlog.infra.postgres.job_queries import PostgresJobQueries
from cronlog.infra.system_clock import SystemClock
from cronlog.projections.state import JobRow
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc

MAX_PAGE = 1000
# Answer this long before the client's deadline, so it gets the reason rather than a bare
# DEADLINE_EXCEEDED; and wait no longer than this for an owner, whatever the deadline.
DEADLINE_MARGIN = 0.25
MOST_COMMAND_WAIT = 120.0
# Page tokens the adapters hand out are well under 200 characters; a longer one is not theirs.
MAX_PAGE_TOKEN_CHARS = 512


Servicer = TypeVar("Servicer")
Request = TypeVar("Request")
Response = TypeVar("Response")


def answered(method: Callable[[Servicer, Request, grpc.ServicerContext], Response]
             ) -> Callable[[Servicer, Request, grpc.ServicerContext], Response]:
    """Every RPC: the application's errors answered with their status, as error_status
    maps them; anything else is a bug and reaches gRPC as one (UNKNOWN, logged)."""

    @functools.wraps(method)
    def answer(self: Servicer, request: Request, context: grpc.ServicerContext) -> Response:
        try:
            return method(self, request, context)
        except Exception as exc:
            status = status_of(exc)
            if status is None:
                raise
            abort(context, status.code, status.message, status.field)

    return answer


def _uuid(value: str, field: str) -> UUID:
    try:
        return UUID(value)
    except ValueError:
        raise InvalidSpec(field, f"{value!r} is not a UUID") from None


def _page_size(value: int) -> int:
    if value < 0:
        raise InvalidSpec("page_size", "must not be negative")
    return min(value or 100, MAX_PAGE)


def _page_token(value: str) -> str | None:
    if len(value) > MAX_PAGE_TOKEN_CHARS:
        raise InvalidSpec("page_token", f"is not a token this service gave out "
                                        f"(over {MAX_PAGE_TOKEN_CHARS} characters)")
    return value or None


Budgeted = TypeVar("Budgeted", JobApi, CalendarApi)


def _within_deadline(api: Budgeted, context: grpc.ServicerContext) -> Budgeted:
    """The api waiting for owners within the caller's gRPC deadline; without one, for the
    configured reply timeout."""
    remaining = context.time_remaining()
    if remaining is None:
        return api
    budget = min(max(remaining - DEADLINE_MARGIN, 0.05), MOST_COMMAND_WAIT)
    return replace(api, reply_timeout=budget,
                   read_your_write_timeout=min(api.read_your_write_timeout, budget))


class JobServiceServicer(channel_rpcs.ChannelRpcs, dead_letter_rpcs.DeadLetterRpcs,
                         AlertDeliveryRpcs, JobRestoreRpcs, HistoryProofRpcs,
                         pb_grpc.JobServiceServicer):
    def __init__(self, api: JobApi, jobs: PostgresJobQueries, history: ClickHouseRunHistory,
                 decode_spec: Callable[[JobRow], JobSpec], clock: SystemClock,
                 auth_required: bool = False, calendars: CalendarApi | None = None,
                 batch_wave: int = WAVE, fleet: FleetView | None = None,
                 declared: DeclaredQueues | None = None) -> None:
        """batch_wave: the most commands of a tenant's CreateJobs an api has waiting on
        owners at once (commands/api/job_batch.py, wave_for). fleet: the live workers (none:
        ListWorkers lists none and jobs get no warnings); declared: what tenants see of them."""
        self._fleet = fleet
        self._declared = declared or DeclaredQueues.of(())
        self._api = api
        self._calendars = calendars
        self._jobs = jobs
        self._history = history
        self._decode_spec = decode_spec
        self._clock = clock
        self._auth_required = auth_required
        # Shared by every CreateJobs call: one wave of a tenant's batches at a time.
        self._batch_turns = TenantTurns(wave=batch_wave)

    def _api_for(self, context: grpc.ServicerContext) -> JobApi:
        """The api waiting for owners within the caller's gRPC deadline; without one, for
        the configured reply timeout."""
        return _within_deadline(self._api, context)

    def _calendar_api(self, context: grpc.ServicerContext) -> CalendarApi:
        if self._calendars is None:
            abort(context, grpc.StatusCode.UNAVAILABLE, "this api cannot read calendars")
        return _within_deadline(self._calendars, context)

    def _scope(self, context: grpc.ServicerContext, *, job_id: str | None = None,
               run_id: str | None = None, tenant: tuple[str, str] | None = None) -> str | None:
        """The tenant check every RPC makes before anything else. Returns the caller's tenant
        (None when the api runs open) once the tenant the request names, as (field, value),
        is the caller's, and the job or run it names belongs to the caller. Another tenant's
        job or run is NOT_FOUND, worded as for one that does not exist, so that a caller
        cannot learn which ids other tenants use."""
        caller = auth.caller_tenant()
        if caller is None:
            if self._auth_required:
                # Only when the interceptor is missing: fail closed rather than serve openly.
                abort(context, grpc.StatusCode.UNAUTHENTICATED, "no authenticated tenant")
            return None
        if tenant is not None and tenant[1] and tenant[1] != caller:
            abort(context, grpc.StatusCode.PERMISSION_DENIED,
                   f"{tenant[0]} {tenant[1]!r} is not the authenticated tenant", tenant[0])
        if job_id is not None:
            row = self._jobs.get(_uuid(job_id, "job_id"))
            if row is None or row.tenant != caller:
                raise JobNotFound(f"job {job_id} not found")
        if run_id is not None and self._run_tenant(_uuid(run_id, "run_id")) != caller:
            abort(context, grpc.StatusCode.NOT_FOUND, f"run {run_id} not found")
        return caller

    def _run_tenant(self, run_id: UUID) -> str | None:
        # Postgres knows a run as soon as the owner applied it; history may lag behind it,
        # but keeps runs that Postgres may no longer hold.
        run = self._jobs.run(run_id)
        if run is not None:
            job = self._jobs.get(run.job_id)
            return job.tenant if job is not None else None
        attempts = self._history.get_run(str(run_id))
        return attempts[0].tenant if attempts else None

    def _job(self, row: JobRow) -> pb.Job:
        job = convert.job_out(row, self._decode_spec(row))
        # The calendar the job's owner applied (issue 20); rows of older schemas have none.
        applied = calendar_rpcs.applied_calendar_out(getattr(row, "calendar", None))
        if applied is not None:
            job.calendar.CopyFrom(applied)
        return job

    @answered
    def CreateJob(self, request: pb.CreateJobRequest,
                  context: grpc.ServicerContext) -> pb.CreateJobResponse:
        caller = self._scope(context, tenant=("spec.tenant", request.spec.tenant))
        if not request.HasField("spec"):
            raise InvalidSpec("spec", "a job spec is required")
        if caller and not request.spec.tenant:
            request.spec.tenant = caller
        row = self._api_for(context).create_job(request.request_id,
                                                convert.spec_in(request.spec))
        job = self._job(row)
        return pb.CreateJobResponse(job=job, warnings=job_warnings(self._fleet, job))

    @answered
    def CreateJobs(self, request: pb.CreateJobsRequest,
                   context: grpc.ServicerContext) -> pb.CreateJobsResponse:
        # Each item's tenant is checked against the caller's in create_jobs.
        caller = self._scope(context)
        api = self._api_for(context)
        return create_jobs.create_jobs(request, caller, JobBatch(
            api, batch_bus(api.bus), self._jobs, self._batch_turns))

    @answered
    def GetJob(self, request: pb.GetJobRequest,
               context: grpc.ServicerContext) -> pb.GetJobResponse:
        self._scope(context, job_id=request.job_id)
        row = self._jobs.get(_uuid(request.job_id, "job_id"))
        if row is None:
            raise JobNotFound(f"job {request.job_id} not found")
        return pb.GetJobResponse(job=self._job(row))

    @answered
    def ListJobs(self, request: pb.ListJobsRequest,
                 context: grpc.ServicerContext) -> pb.ListJobsResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        rows, token = self._jobs.list(caller or request.tenant or None,
                                      _page_size(request.page_size),
                                      _page_token(request.page_token),
                                      job_list_filter(request),
                                      max_bytes=MAX_RESPONSE_BYTES)
        # A job may carry a 256 KiB payload and 44 KB of exclusions: a page of 1,000
        # could outgrow the 4 MiB a gRPC client takes. Postgres returns at most 3 MiB
        # of rows (byte_pages); as messages they may be a little larger, so as many as
        # fit, at least one, and the page goes on after the last one kept.
        response = pb.ListJobsResponse()
        size = 0
        for index, row in enumerate(rows):
            job = self._job(row)
            size += job.ByteSize() + 8
            if index and size > MAX_RESPONSE_BYTES:
                token = self._jobs.token_after(rows[index - 1])
                break
            response.jobs.append(job)
        response.next_page_token = token or ""
        return response

    @answered
    def GetRun(self, request: pb.GetRunRequest,
               context: grpc.ServicerContext) -> pb.GetRunResponse:
        self._scope(context, run_id=request.run_id)
        attempts = self._history.get_run(str(_uuid(request.run_id, "run_id")))
        if not attempts:
            abort(context, grpc.StatusCode.NOT_FOUND, f"run {request.run_id} not found")
        return pb.GetRunResponse(run=bounded_run(convert.run_out(attempts)))

    @answered
    def ListRuns(self, request: pb.ListRunsRequest,
                 context: grpc.ServicerContext) -> pb.ListRunsResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        status = None
        if request.status != pb.RUN_STATUS_UNSPECIFIED:
            if request.status not in convert.RUN_STATUS_NAME:
                raise InvalidSpec("status", f"unknown run status {request.status}")
            status = convert.RUN_STATUS_NAME[request.status]
        run_filter = RunFilter(
            job_id=str(_uuid(request.job_id, "job_id")) if request.job_id else None,
            tenant=caller or request.tenant or None, status=status,
            scheduled_after=convert.timestamp_in(request.scheduled_after, "scheduled_after")
            if request.HasField("scheduled_after") else None,
            scheduled_before=convert.timestamp_in(request.scheduled_before,
                                                  "scheduled_before")
            if request.HasField("scheduled_before") else None,
        )
        runs, token = self._history.list_runs(run_filter, _page_size(request.page_size),
                                              _page_token(request.page_token))
        page, token = bounded_page(
            runs, convert.run_out,
            lambda last: encode_page_token(last.scheduled_at_us, last.run_id), token)
        return pb.ListRunsResponse(runs=page, next_page_token=token or "")

    @answered
    def PreviewSchedule(self, request: pb.PreviewScheduleRequest,
                        context: grpc.ServicerContext) -> pb.PreviewScheduleResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        return preview_schedule(request, self._calendars, caller, self._clock.now())

    @answered
    def CreateCalendar(self, request: pb.CreateCalendarRequest,
                       context: grpc.ServicerContext) -> pb.CreateCalendarResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        return calendar_rpcs.create_calendar(self._calendar_api(context), caller, request)

    @answered
    def UpdateCalendar(self, request: pb.UpdateCalendarRequest,
                       context: grpc.ServicerContext) -> pb.UpdateCalendarResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        return calendar_rpcs.update_calendar(self._calendar_api(context), caller, request)

    @answered
    def GetCalendar(self, request: pb.GetCalendarRequest,
                    context: grpc.ServicerContext) -> pb.GetCalendarResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        return calendar_rpcs.get_calendar(self._calendar_api(context), caller, request)

    @answered
    def ListCalendars(self, request: pb.ListCalendarsRequest,
                      context: grpc.ServicerContext) -> pb.ListCalendarsResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        return calendar_rpcs.list_calendars(self._calendar_api(context), caller, request)

    @answered
    def ListWorkers(self, request: pb.ListWorkersRequest,
                    context: grpc.ServicerContext) -> pb.ListWorkersResponse:
        return list_workers(self._fleet, self._declared, self._scope(context), request.queue)

    def _change(self, context: grpc.ServicerContext, name: str, request: Any) -> pb.Job:
        row = self._api_for(context).change_job(name, request.request_id, _uuid(request.job_id, "job_id"))
        return self._job(row)

    @answered
    def UpdateJob(self, request: pb.UpdateJobRequest,
                  context: grpc.ServicerContext) -> pb.UpdateJobResponse:
        caller = self._scope(context, job_id=request.job_id,
                             tenant=("spec.tenant", request.spec.tenant))
        if not request.HasField("spec"):
            raise InvalidSpec("spec", "a job spec is required")
        if caller and not request.spec.tenant:
            request.spec.tenant = caller
        row = self._api_for(context).update_job(
            request.request_id, _uuid(request.job_id, "job_id"), request.expected_version,
            convert.spec_in(request.spec))
        job = self._job(row)
        return pb.UpdateJobResponse(job=job, warnings=job_warnings(self._fleet, job))

    @answered
    def PauseJob(self, request: pb.PauseJobRequest,
                 context: grpc.ServicerContext) -> pb.PauseJobResponse:
        self._scope(context, job_id=request.job_id)
        return pb.PauseJobResponse(job=self._change(context, Command.PAUSE_JOB, request))

    @answered
    def ResumeJob(self, request: pb.ResumeJobRequest,
                  context: grpc.ServicerContext) -> pb.ResumeJobResponse:
        self._scope(context, job_id=request.job_id)
        return pb.ResumeJobResponse(job=self._change(context, Command.RESUME_JOB, request))

    @answered
    def DeleteJob(self, request: pb.DeleteJobRequest,
                  context: grpc.ServicerContext) -> pb.DeleteJobResponse:
        self._scope(context, job_id=request.job_id)
        return pb.DeleteJobResponse(job=self._change(context, Command.DELETE_JOB, request))

    @answered
    def TriggerJob(self, request: pb.TriggerJobRequest,
                   context: grpc.ServicerContext) -> pb.TriggerJobResponse:
        self._scope(context, job_id=request.job_id)
        job_id = _uuid(request.job_id, "job_id")
        api = self._api_for(context)
        run_id = api.trigger_job(request.request_id, job_id, request.cascade)
        row = api.wait_for_run(run_id)
        run = pb.Run(run_id=str(run_id), job_id=str(job_id), trigger="manual",
                     status=convert.RUN_STATUS_PB.get(row.status, pb.RUN_STATUS_SCHEDULED)
                     if row else pb.RUN_STATUS_SCHEDULED,
                     idempotency_key=str(run_id),
                     cascade=request.request_id if request.cascade else "")
        if row is not None:
            # A manual run's chain starts at its own fire time.
            run.scheduled_at.FromDatetime(row.scheduled_at)
            run.logical_time.FromDatetime(row.scheduled_at)
        return pb.TriggerJobResponse(run=run)

    @answered
    def BackfillJob(self, request: Any, context: grpc.ServicerContext) -> Any:
        # Tenant scoping first: another tenant's job is NOT_FOUND before anything reaches
        # its owner.
        self._scope(context, job_id=request.job_id)
        for name in ("from", "until"):
            if not request.HasField(name):
                raise InvalidSpec(name, "is required")
        run_ids = self._api_for(context).backfill_job(
            request.request_id, _uuid(request.job_id, "job_id"),
            convert.timestamp_in(getattr(request, "from"), "from"),
            convert.timestamp_in(request.until, "until"), self._decode_spec,
            request.cascade)
        return pb.BackfillJobResponse(run_ids=[str(r) for r in run_ids])

    @answered
    def CancelRun(self, request: Any, context: grpc.ServicerContext) -> Any:
        # Tenant scoping first: another tenant's run is NOT_FOUND before anything reaches
        # its owner.
        self._scope(context, run_id=request.run_id)
        run_id = _uuid(request.run_id, "run_id")
        row = self._api_for(context).cancel_run(request.request_id, run_id)
        return pb.CancelRunResponse(run=self._run_as_decided(run_id, row))

    @answered
    def RedriveRun(self, request: Any, context: grpc.ServicerContext) -> Any:
        # Tenant scoping first, as for CancelRun.
        caller = self._scope(context, run_id=request.run_id)
        run_id = _uuid(request.run_id, "run_id")
        who = caller or f"caller at {context.peer()}"  # an open api knows no tenant
        row = self._api_for(context).redrive_run(request.request_id, run_id, who)
        return pb.RedriveRunResponse(run=self._run_as_decided(run_id, row))

    def _run_as_decided(self, run_id: UUID, row: Any) -> Any:
        """The run from the history, with the status the state store has now: the history
        follows the log a moment later."""
        attempts = self._history.get_run(str(run_id))
        run = convert.run_out(attempts) if attempts else pb.Run(
            run_id=str(run_id), job_id=str(row.job_id) if row else "",
            idempotency_key=str(run_id))
        if row is not None:
            run.status = convert.RUN_STATUS_PB.get(row.status, run.status)
        return run
