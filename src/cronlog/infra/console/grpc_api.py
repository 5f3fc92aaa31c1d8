"""The console's JobsApi over cronlog.client. Every call carries the signed-in tenant's
token as `authorization: Bearer`, as the CLI sends CRONLOG_TOKEN, and a refusal reaches the
pages as ApiRefused."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import ParamSpec, TypeVar

from cronlog.client import ApiError, CronlogClient, Timeouts
from cronlog.console.budget import time_left
from cronlog.console.ports import (
    ANY_JOB,
    ApiRefused,
    Credentials,
    DeliveryLine,
    JobChange,
    JobPage,
    JobQuery,
    JobSummary,
    NewJob,
    RunPage,
    RunSummary,
    WhatIfSummary,
)
from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.infra.console.summaries import job_summary, run_summary, what_if_summary
from cronlog.v1 import job_service_pb2 as pb

P = ParamSpec("P")
T = TypeVar("T")
JOB_STATUS_PB = {"active": pb.JOB_STATUS_ACTIVE, "paused": pb.JOB_STATUS_PAUSED,
                 "completed": pb.JOB_STATUS_COMPLETED, "deleted": pb.JOB_STATUS_DELETED}
READ_TIMEOUT = 10.0
WRITE_TIMEOUT = 30.0
# A read gets what is left of its page's time limit (budget.py), but at least this: a page
# whose charts took its time still shows the api's answer or a clear error.
LEAST_READ_TIMEOUT = 0.5
# How long the api's mode (open, or with tokens) is taken as known: the sign-in page asks
# for it, and without tokens on the api each asking is a refused call in the api's log.
PROBE_SECONDS = 10.0


def _refused(exc: ApiError) -> ApiRefused:
    return ApiRefused(exc.code_name, exc.message or "no details", exc.field)


def _refusals(method: Callable[P, T]) -> Callable[P, T]:
    """The client's ApiError as the pages' ApiRefused."""
    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(*args, **kwargs)
        except ApiError as exc:
            raise _refused(exc) from None
    return call


def _changed(current: pb.Job, change: JobChange) -> pb.JobSpec:
    """The job's spec with what the update form sets: the rest as the job has it."""
    spec = pb.JobSpec()
    spec.CopyFrom(current.spec)
    spec.name, spec.handler, spec.queue = change.name, change.handler, change.queue
    spec.time_zone, spec.payload = change.time_zone, change.payload
    if change.cron is not None and spec.WhichOneof("schedule") == "cron":
        spec.cron = change.cron
    spec.labels.clear()
    spec.labels.update(change.labels)
    return spec


def _own_tenant(who: Credentials) -> str:
    # With tokens the api takes the token's tenant; an open api is told the session's.
    return who.tenant if who.token is None else ""


class GrpcJobsApi:
    def __init__(self, client: CronlogClient,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._monotonic = monotonic
        self._probed: tuple[float, bool] | None = None
        self._probe_lock = threading.Lock()

    def _as(self, who: Credentials) -> CronlogClient:
        """The client with who's token; a read's deadline is what is left of the page's."""
        read = max(LEAST_READ_TIMEOUT, min(READ_TIMEOUT, time_left(READ_TIMEOUT)))
        return self._client.with_options(token=who.token, timeouts=Timeouts(
            read=read, write=WRITE_TIMEOUT, batch=WRITE_TIMEOUT))

    def probe_open(self) -> bool:
        """Asked at most once per PROBE_SECONDS (a failed ask is not remembered)."""
        with self._probe_lock:
            now = self._monotonic()
            if self._probed is not None and now - self._probed[0] < PROBE_SECONDS:
                return self._probed[1]
            try:
                self._as(Credentials(None, "")).list_jobs(pb.ListJobsRequest(page_size=1))
                is_open = True
            except ApiError as exc:
                if exc.code_name != "UNAUTHENTICATED":
                    raise _refused(exc) from None
                is_open = False
            self._probed = (now, is_open)
            return is_open

    @_refusals
    def list_jobs(self, who: Credentials, page_size: int, page_token: str,
                  query: JobQuery = ANY_JOB) -> JobPage:
        page = self._as(who).list_jobs(pb.ListJobsRequest(
            tenant=_own_tenant(who), page_size=page_size, page_token=page_token,
            # A status the api does not know goes as UNSPECIFIED, which it refuses by name.
            statuses=[JOB_STATUS_PB.get(s, pb.JOB_STATUS_UNSPECIFIED) for s in query.statuses],
            queue=query.queue, name_contains=query.name_contains,
            labels=[pb.LabelSelector(key=k) if v is None else pb.LabelSelector(key=k, value=v)
                    for k, v in query.labels]))
        return JobPage([job_summary(j) for j in page.items], page.next_page_token)

    @_refusals
    def get_job(self, who: Credentials, job_id: str) -> JobSummary:
        return job_summary(self._as(who).get_job(job_id))

    @_refusals
    def create_job(self, who: Credentials, request_id: str, job: NewJob) -> JobSummary:
        spec = pb.JobSpec(name=job.name, tenant=_own_tenant(who), queue=job.queue,
                          handler=job.handler, payload=job.payload, cron=job.cron,
                          time_zone=job.time_zone, labels=dict(job.labels))
        return job_summary(self._as(who).create_job(spec, request_id=request_id))

    @_refusals
    def pause_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary:
        return job_summary(self._as(who).pause_job(job_id, request_id=request_id))

    @_refusals
    def resume_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary:
        return job_summary(self._as(who).resume_job(job_id, request_id=request_id))

    @_refusals
    def delete_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary:
        return job_summary(self._as(who).delete_job(job_id, request_id=request_id))

    @_refusals
    def trigger_job(self, who: Credentials, request_id: str, job_id: str) -> RunSummary:
        return run_summary(self._as(who).trigger_job(job_id, request_id=request_id))

    @_refusals
    def update_job(self, who: Credentials, request_id: str, job_id: str,
                   version: int, change: JobChange) -> JobSummary:
        # On top of the job as read, as `cronlog jobs update` does: what the form does not
        # show keeps its value. The version the form was filled at goes as expected_version,
        # so a change made since the form was filled (or since this read) is refused.
        client = self._as(who)
        spec = _changed(client.get_job(job_id), change)
        return job_summary(client.update_job(job_id, spec, expected_version=version,
                                             request_id=request_id))

    @_refusals
    def what_if(self, who: Credentials, job_id: str, change: JobChange, since: datetime,
                until: datetime) -> WhatIfSummary:
        client = self._as(who)
        return what_if_summary(client.what_if(job_id, _changed(client.get_job(job_id), change),
                                              since, until), since, until)

    @_refusals
    def restore_job(self, who: Credentials, request_id: str, job_id: str, version: int,
                    skip_missed: bool) -> JobSummary:
        return job_summary(self._as(who).restore_job(job_id, version, skip_missed=skip_missed,
                                                     request_id=request_id).job)

    @_refusals
    def backfill_job(self, who: Credentials, request_id: str, job_id: str, start: datetime,
                     end: datetime) -> Sequence[str]:
        return self._as(who).backfill_job(job_id, start, end, request_id=request_id)

    @_refusals
    def list_runs(self, who: Credentials, job_id: str, page_size: int,
                  page_token: str) -> RunPage:
        page = self._as(who).list_runs(pb.ListRunsRequest(
            job_id=job_id, tenant=_own_tenant(who), page_size=page_size,
            page_token=page_token))
        return RunPage([run_summary(r) for r in page.items], page.next_page_token)

    @_refusals
    def get_run(self, who: Credentials, run_id: str) -> RunSummary:
        return run_summary(self._as(who).get_run(run_id))

    @_refusals
    def cancel_run(self, who: Credentials, request_id: str, run_id: str) -> RunSummary:
        return run_summary(self._as(who).cancel_run(run_id, request_id=request_id))

    @_refusals
    def redrive_run(self, who: Credentials, request_id: str, run_id: str) -> RunSummary:
        return run_summary(self._as(who).redrive_run(run_id, request_id=request_id))

    @_refusals
    def preview(self, who: Credentials, job: JobSummary, after: datetime,
                count: int) -> Sequence[datetime]:
        request = pb.PreviewScheduleRequest(
            time_zone=job.time_zone, count=count, exclusions=list(job.exclusions),
            calendar=job.calendar, tenant=job.tenant if job.calendar else "")
        if job.schedule_kind == "every":
            request.every.FromTimedelta(job.every)
        else:
            request.cron = job.schedule
        for name, value in (("start_at", job.start_at), ("end_at", job.end_at)):
            if value is not None:
                getattr(request, name).FromDatetime(value)
        request.after.FromDatetime(after)
        answer = self._as(who).preview_schedule(request)
        return [t.ToDatetime(tzinfo=UTC) for t in answer.fire_times]

    @_refusals
    def list_workers(self, who: Credentials) -> Sequence[WorkerAnnouncement]:
        return [WorkerAnnouncement(
            worker_id=w.worker_id, host=w.host, queues=tuple(w.queues),
            handlers=tuple(w.handlers), slots=w.slots, slots_in_use=w.slots_in_use,
            version=w.version, at=w.last_seen.ToDatetime(tzinfo=UTC))
            for w in self._as(who).list_workers()]

    @_refusals
    def list_alert_deliveries(self, who: Credentials, job_id: str,
                              page_size: int) -> Sequence[DeliveryLine]:
        page = self._as(who).list_alert_deliveries(_own_tenant(who), job_id=job_id,
                                                   page_size=page_size)
        return [DeliveryLine(
            sent_at=a.sent_at.ToDatetime(tzinfo=UTC) if a.HasField("sent_at") else None,
            kind=a.kind, channel_name=a.channel_name, channel_kind=a.channel_kind,
            attempt=a.attempt, outcome=a.outcome, status_code=a.status_code,
            latency_ms=a.latency_ms, error=a.error, digest_count=a.digest_count)
            for a in page.items]
