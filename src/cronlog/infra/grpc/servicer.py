"""JobServiceServicer: gRPC requests to the application layer, errors to status codes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, NoReturn, TypeVar
from uuid import UUID

import grpc

from cronlog.commands.calendar_api import CalendarApi
from cronlog.commands.calendar_snapshot import CalendarMissing
from cronlog.commands.job_api import CommandRejected, JobApi
from cronlog.commands.job_batch import JobBatch, batch_bus
from cronlog.domain.bounds import MOST_PREVIEWED, require_count
from cronlog.domain.calendar import CalendarNotFound
from cronlog.domain.catalogue import Command
from cronlog.domain.errors import InvalidSpec, JobNotFound, RunNotFound, ScheduleTooCostly
from cronlog.domain.exclusions import ExcludingSchedule
from cronlog.domain.limits import TenantLimitReached
from cronlog.domain.schedule import (
    BoundedSchedule,
    CronSchedule,
    IntervalSchedule,
    Schedule,
    preview,
    zone_named,
)
from cronlog.domain.schedule_explained import describe, explain
from cronlog.domain.spec import JobSpec
from cronlog.infra.clickhouse.run_history import (
    ClickHouseRunHistory,
    HistoryStoreError,
    InvalidRunPageToken,
    RunFilter,
    encode_page_token,
)
from cronlog.infra.grpc import auth, calendar_rpcs, convert, create_jobs
from cronlog.infra.grpc.job_list_filter import job_list_filter
from cronlog.infra.grpc.response_size import MAX_RESPONSE_BYTES, bounded_page, bounded_run
from cronlog.infra.kafka.command_channel import CommandNotAnswered, CommandNotSent
from cronlog.infra.postgres.connection import StateStoreError
from cronlog.infra.postgres.job_queries import InvalidPageToken, PostgresJobQueries
from cronlog.infra.system_clock import SystemClock
from cronlog.projections.state import JobRow
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

MAX_PAGE = 1000
MAX_PREVIEW = MOST_PREVIEWED
# Answer this long before the client's deadline, so it gets the reason rather than a bare
# DEADLINE_EXCEEDED; and wait no longer than this for an owner, whatever the deadline.
DEADLINE_MARGIN = 0.25
MOST_COMMAND_WAIT = 120.0
# Page tokens the adapters hand out are well under 200 characters; a longer one is not theirs.
MAX_PAGE_TOKEN_CHARS = 512


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str,
           field: str | None = None) -> NoReturn:
    if field:
        context.set_trailing_metadata((("cronlog-field", field),))
    context.abort(code, message)
    raise AssertionError("unreachable")  # context.abort raises


@contextmanager
def _status(context: grpc.ServicerContext) -> Iterator[None]:
    """Translates the application's errors into gRPC status codes at the edge."""
    try:
        yield
    except InvalidSpec as exc:
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc), exc.field)
    except (InvalidPageToken, InvalidRunPageToken) as exc:
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc), "page_token")
    except TenantLimitReached as exc:
        _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
    except (JobNotFound, RunNotFound, CalendarNotFound) as exc:
        _abort(context, grpc.StatusCode.NOT_FOUND, str(exc))
    except CalendarMissing as exc:
        _abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(exc), exc.field)
    except CommandRejected as exc:
        code = getattr(grpc.StatusCode, exc.code, grpc.StatusCode.INTERNAL)
        _abort(context, code, str(exc), exc.field)
    except (CommandNotAnswered, CommandNotSent) as exc:
        _abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))
    except (StateStoreError, HistoryStoreError) as exc:
        log.warning("store unavailable: %s", exc)
        _abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))


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


class JobServiceServicer(pb_grpc.JobServiceServicer):
    def __init__(self, api: JobApi, jobs: PostgresJobQueries, history: ClickHouseRunHistory,
                 decode_spec: Callable[[JobRow], JobSpec], clock: SystemClock,
                 auth_required: bool = False, calendars: CalendarApi | None = None) -> None:
        self._api = api
        self._calendars = calendars
        self._jobs = jobs
        self._history = history
        self._decode_spec = decode_spec
        self._clock = clock
        self._auth_required = auth_required

    def _api_for(self, context: grpc.ServicerContext) -> JobApi:
        """The api waiting for owners within the caller's gRPC deadline; without one, for
        the configured reply timeout."""
        return _within_deadline(self._api, context)

    def _calendar_api(self, context: grpc.ServicerContext) -> CalendarApi:
        if self._calendars is None:
            _abort(context, grpc.StatusCode.UNAVAILABLE, "this api cannot read calendars")
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
                _abort(context, grpc.StatusCode.UNAUTHENTICATED, "no authenticated tenant")
            return None
        if tenant is not None and tenant[1] and tenant[1] != caller:
            _abort(context, grpc.StatusCode.PERMISSION_DENIED,
                   f"{tenant[0]} {tenant[1]!r} is not the authenticated tenant", tenant[0])
        if job_id is not None:
            row = self._jobs.get(_uuid(job_id, "job_id"))
            if row is None or row.tenant != caller:
                raise JobNotFound(f"job {job_id} not found")
        if run_id is not None and self._run_tenant(_uuid(run_id, "run_id")) != caller:
            _abort(context, grpc.StatusCode.NOT_FOUND, f"run {run_id} not found")
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

    def CreateJob(self, request: pb.CreateJobRequest,
                  context: grpc.ServicerContext) -> pb.CreateJobResponse:
        with _status(context):
            caller = self._scope(context, tenant=("spec.tenant", request.spec.tenant))
            if not request.HasField("spec"):
                raise InvalidSpec("spec", "a job spec is required")
            if caller and not request.spec.tenant:
                request.spec.tenant = caller
            row = self._api_for(context).create_job(request.request_id,
                                                    convert.spec_in(request.spec))
            return pb.CreateJobResponse(job=self._job(row))
        raise AssertionError("unreachable")

    def CreateJobs(self, request: pb.CreateJobsRequest,
                   context: grpc.ServicerContext) -> pb.CreateJobsResponse:
        with _status(context):
            # Each item's tenant is checked against the caller's in create_jobs.
            caller = self._scope(context)
            api = self._api_for(context)
            return create_jobs.create_jobs(request, caller, JobBatch(
                api, batch_bus(api.bus), self._jobs))
        raise AssertionError("unreachable")

    def GetJob(self, request: pb.GetJobRequest,
               context: grpc.ServicerContext) -> pb.GetJobResponse:
        with _status(context):
            self._scope(context, job_id=request.job_id)
            row = self._jobs.get(_uuid(request.job_id, "job_id"))
            if row is None:
                raise JobNotFound(f"job {request.job_id} not found")
            return pb.GetJobResponse(job=self._job(row))
        raise AssertionError("unreachable")

    def ListJobs(self, request: pb.ListJobsRequest,
                 context: grpc.ServicerContext) -> pb.ListJobsResponse:
        with _status(context):
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
        raise AssertionError("unreachable")

    def GetRun(self, request: pb.GetRunRequest,
               context: grpc.ServicerContext) -> pb.GetRunResponse:
        with _status(context):
            self._scope(context, run_id=request.run_id)
            attempts = self._history.get_run(str(_uuid(request.run_id, "run_id")))
            if not attempts:
                _abort(context, grpc.StatusCode.NOT_FOUND, f"run {request.run_id} not found")
            return pb.GetRunResponse(run=bounded_run(convert.run_out(attempts)))
        raise AssertionError("unreachable")

    def ListRuns(self, request: pb.ListRunsRequest,
                 context: grpc.ServicerContext) -> pb.ListRunsResponse:
        with _status(context):
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
        raise AssertionError("unreachable")

    def PreviewSchedule(self, request: pb.PreviewScheduleRequest,
                        context: grpc.ServicerContext) -> pb.PreviewScheduleResponse:
        with _status(context):
            caller = self._scope(context, tenant=("tenant", request.tenant))
            require_count(request.count, "count", MAX_PREVIEW)
            zone_name = request.time_zone or "UTC"
            zone = zone_named(zone_name, "time_zone")
            # The same range a job's times must keep: a preview answers what a job would do.
            start = (convert.instant_in(request.start_at, "start_at")
                     if request.HasField("start_at") else None)
            schedule: Schedule
            if request.HasField("every"):
                if request.cron:
                    raise InvalidSpec("every", "give a cron expression or an interval, not both")
                schedule = IntervalSchedule.checked(convert.every_in(request.every, "every"),
                                                    start, field="every")
            else:
                # Invariant 12: what a job would be refused for, a preview is too.
                schedule = CronSchedule.parse(request.cron, zone_name, field="cron",
                                              zone_field="time_zone").admitted("cron")
            end = (convert.instant_in(request.end_at, "end_at")
                   if request.HasField("end_at") else None)
            if start or end:
                schedule = BoundedSchedule(schedule, start, end)
            after = (convert.instant_in(request.after, "after") if request.HasField("after")
                     else self._clock.now())
            excluded, excluded_words = calendar_rpcs.preview_exclusions(
                self._calendars, caller, request)
            # Times from the schedule without the excluded days; words and DST notes from
            # the schedule itself, which they describe.
            firing = ExcludingSchedule(schedule, excluded, zone) if excluded else schedule
            try:
                # At most MOST_PREVIEWED searches, each within schedule_search's bound.
                times = preview(firing, after, request.count or 10)
            except ScheduleTooCostly as exc:
                raise ScheduleTooCostly(
                    ("calendar" if request.calendar else "exclusions") if excluded else "cron",
                    exc.message) from exc
            description = describe(schedule, zone_name)
            if excluded_words:
                description += f"; not on the days of {excluded_words}"
            return convert.preview_out(explain(schedule, zone, after, times, description))
        raise AssertionError("unreachable")

    def CreateCalendar(self, request: pb.CreateCalendarRequest,
                       context: grpc.ServicerContext) -> pb.CreateCalendarResponse:
        with _status(context):
            caller = self._scope(context, tenant=("tenant", request.tenant))
            return calendar_rpcs.create_calendar(self._calendar_api(context), caller, request)
        raise AssertionError("unreachable")

    def UpdateCalendar(self, request: pb.UpdateCalendarRequest,
                       context: grpc.ServicerContext) -> pb.UpdateCalendarResponse:
        with _status(context):
            caller = self._scope(context, tenant=("tenant", request.tenant))
            return calendar_rpcs.update_calendar(self._calendar_api(context), caller, request)
        raise AssertionError("unreachable")

    def GetCalendar(self, request: pb.GetCalendarRequest,
                    context: grpc.ServicerContext) -> pb.GetCalendarResponse:
        with _status(context):
            caller = self._scope(context, tenant=("tenant", request.tenant))
            return calendar_rpcs.get_calendar(self._calendar_api(context), caller, request)
        raise AssertionError("unreachable")

    def ListCalendars(self, request: pb.ListCalendarsRequest,
                      context: grpc.ServicerContext) -> pb.ListCalendarsResponse:
        with _status(context):
            caller = self._scope(context, tenant=("tenant", request.tenant))
            return calendar_rpcs.list_calendars(self._calendar_api(context), caller, request)
        raise AssertionError("unreachable")

    def _change(self, context: grpc.ServicerContext, name: str, request: Any) -> pb.Job:
        row = self._api_for(context).change_job(name, request.request_id,
                                                _uuid(request.job_id, "job_id"))
        return self._job(row)

    def UpdateJob(self, request: pb.UpdateJobRequest,
                  context: grpc.ServicerContext) -> pb.UpdateJobResponse:
        with _status(context):
            caller = self._scope(context, job_id=request.job_id,
                                 tenant=("spec.tenant", request.spec.tenant))
            if not request.HasField("spec"):
                raise InvalidSpec("spec", "a job spec is required")
            if caller and not request.spec.tenant:
                request.spec.tenant = caller
            row = self._api_for(context).update_job(
                request.request_id, _uuid(request.job_id, "job_id"), request.expected_version,
                convert.spec_in(request.spec))
            return pb.UpdateJobResponse(job=self._job(row))
        raise AssertionError("unreachable")

    def PauseJob(self, request: pb.PauseJobRequest,
                 context: grpc.ServicerContext) -> pb.PauseJobResponse:
        with _status(context):
            self._scope(context, job_id=request.job_id)
            return pb.PauseJobResponse(job=self._change(context, Command.PAUSE_JOB, request))
        raise AssertionError("unreachable")

    def ResumeJob(self, request: pb.ResumeJobRequest,
                  context: grpc.ServicerContext) -> pb.ResumeJobResponse:
        with _status(context):
            self._scope(context, job_id=request.job_id)
            return pb.ResumeJobResponse(job=self._change(context, Command.RESUME_JOB, request))
        raise AssertionError("unreachable")

    def DeleteJob(self, request: pb.DeleteJobRequest,
                  context: grpc.ServicerContext) -> pb.DeleteJobResponse:
        with _status(context):
            self._scope(context, job_id=request.job_id)
            return pb.DeleteJobResponse(job=self._change(context, Command.DELETE_JOB, request))
        raise AssertionError("unreachable")

    def TriggerJob(self, request: pb.TriggerJobRequest,
                   context: grpc.ServicerContext) -> pb.TriggerJobResponse:
        with _status(context):
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
        raise AssertionError("unreachable")

    def BackfillJob(self, request: Any, context: grpc.ServicerContext) -> Any:
        # Tenant scoping, kept apart from the body: another tenant's job is NOT_FOUND
        # before anything reaches its owner.
        with _status(context):
            self._scope(context, job_id=request.job_id)
        with _status(context):
            for name in ("from", "until"):
                if not request.HasField(name):
                    raise InvalidSpec(name, "is required")
            run_ids = self._api_for(context).backfill_job(
                request.request_id, _uuid(request.job_id, "job_id"),
                convert.timestamp_in(getattr(request, "from"), "from"),
                convert.timestamp_in(request.until, "until"), self._decode_spec,
                request.cascade)
            return pb.BackfillJobResponse(run_ids=[str(r) for r in run_ids])
        raise AssertionError("unreachable")

    def CancelRun(self, request: Any, context: grpc.ServicerContext) -> Any:
        # Tenant scoping, kept apart from the body: another tenant's run is NOT_FOUND
        # before anything reaches its owner.
        with _status(context):
            self._scope(context, run_id=request.run_id)
        with _status(context):
            run_id = _uuid(request.run_id, "run_id")
            row = self._api_for(context).cancel_run(request.request_id, run_id)
            attempts = self._history.get_run(str(run_id))
            run = convert.run_out(attempts) if attempts else pb.Run(
                run_id=str(run_id), job_id=str(row.job_id) if row else "",
                idempotency_key=str(run_id))
            if row is not None:
                # History follows the log a moment later; the state store has the outcome now.
                run.status = convert.RUN_STATUS_PB.get(row.status, run.status)
            return pb.CancelRunResponse(run=run)
        raise AssertionError("unreachable")
