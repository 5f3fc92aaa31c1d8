"""The console's JobsApi over the api's gRPC service. Every call carries the signed-in
tenant's token as `authorization: Bearer`, as the CLI sends CRONLOG_TOKEN."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar, cast

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from cronlog.console.budget import time_left
from cronlog.console.ports import (
    ANY_JOB,
    ApiRefused,
    AttemptSummary,
    Credentials,
    JobChange,
    JobPage,
    JobQuery,
    JobSummary,
    NewJob,
    RunPage,
    RunSummary,
)
from cronlog.domain.schedule_words import duration_words
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc

T = TypeVar("T")
JOB_STATUS_PB = {"active": pb.JOB_STATUS_ACTIVE, "paused": pb.JOB_STATUS_PAUSED,
                 "completed": pb.JOB_STATUS_COMPLETED, "deleted": pb.JOB_STATUS_DELETED}
Metadata = tuple[tuple[str, str | bytes], ...]
READ_TIMEOUT = 10.0
WRITE_TIMEOUT = 30.0
# A read gets what is left of its page's time limit (budget.py), but at least this: a page
# whose charts took its time still shows the api's answer or a clear error.
LEAST_READ_TIMEOUT = 0.5
# How long the api's mode (open, or with tokens) is taken as known: the sign-in page asks
# for it, and without tokens on the api each asking is a refused call in the api's log.
PROBE_SECONDS = 10.0


def _time(message: object, field: str) -> datetime | None:
    if not message.HasField(field):  # type: ignore[attr-defined]
        return None
    ts = cast(Timestamp, getattr(message, field))
    return ts.ToDatetime(tzinfo=UTC)


def _enum(value: int, enum: object, prefix: str) -> str:
    name: str = enum.Name(value)  # type: ignore[attr-defined]
    return name.removeprefix(prefix).lower() if value else ""


def fingerprint(spec: pb.JobSpec) -> str:
    return hashlib.sha256(spec.SerializeToString(deterministic=True)).hexdigest()[:32]


def job_summary(job: pb.Job) -> JobSummary:
    spec = job.spec
    kind = spec.WhichOneof("schedule") or ""
    if kind == "cron":
        schedule = spec.cron
    elif kind == "at":
        schedule = "at " + spec.at.ToDatetime(tzinfo=UTC).isoformat()
    elif kind == "after":
        schedule = "after " + ", ".join(spec.after.job_ids)
    elif kind == "every":
        schedule = "every " + duration_words(spec.every.ToTimedelta())
    else:
        schedule = ""
    retry = spec.retry_policy
    return JobSummary(
        job_id=job.job_id, name=spec.name, tenant=spec.tenant, queue=spec.queue,
        handler=spec.handler, schedule=schedule, schedule_kind=kind,
        time_zone=spec.time_zone or "UTC",
        status=_enum(job.status, pb.JobStatus, "JOB_STATUS_"), version=job.version,
        next_fire_at=_time(job, "next_fire_at"), last_fired_at=_time(job, "last_fired_at"),
        created_at=_time(job, "created_at"), updated_at=_time(job, "updated_at"),
        labels=dict(spec.labels), payload=spec.payload,
        timeout_seconds=spec.timeout.ToTimedelta().total_seconds(),
        max_attempts=retry.max_attempts,
        misfire_policy=_enum(spec.misfire_policy, pb.MisfirePolicy, "MISFIRE_POLICY_"),
        overlap_policy=_enum(spec.overlap_policy, pb.OverlapPolicy, "OVERLAP_POLICY_"),
        start_at=_time(spec, "start_at"), end_at=_time(spec, "end_at"),
        dependents=tuple(job.dependent_job_ids), spec_fingerprint=fingerprint(spec),
        every=spec.every.ToTimedelta() if kind == "every" else timedelta(0),
        exclusions=tuple(spec.exclusions), calendar=spec.calendar)


def _lag(message: object) -> float | None:
    if not message.HasField("start_lag"):  # type: ignore[attr-defined]
        return None
    return float(message.start_lag.ToTimedelta().total_seconds())  # type: ignore[attr-defined]


def run_summary(run: pb.Run) -> RunSummary:
    attempts = tuple(
        AttemptSummary(a.number, _enum(a.status, pb.AttemptStatus, "ATTEMPT_STATUS_"), a.worker,
                       _time(a, "dispatched_at"), _time(a, "started_at"), _time(a, "finished_at"),
                       _lag(a), a.output, a.output_truncated, a.error)
        for a in run.attempts)
    return RunSummary(run.run_id, run.job_id, run.tenant,
                      _enum(run.status, pb.RunStatus, "RUN_STATUS_"), run.trigger,
                      _time(run, "scheduled_at"), _time(run, "started_at"),
                      _time(run, "finished_at"), _lag(run), run.reason, run.idempotency_key,
                      attempts)


def channel_for(address: str, ca_file: str = "") -> grpc.Channel:
    """TLS to the api when a CA file is given (as the CLI's CRONLOG_TLS_CA), else plaintext."""
    if ca_file:
        return grpc.secure_channel(address, grpc.ssl_channel_credentials(Path(ca_file).read_bytes()))
    return grpc.insecure_channel(address)


class GrpcJobsApi:
    def __init__(self, channel: grpc.Channel,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._stub = pb_grpc.JobServiceStub(channel)
        self._monotonic = monotonic
        self._probed: tuple[float, bool] | None = None
        self._probe_lock = threading.Lock()

    @staticmethod
    def _metadata(who: Credentials) -> Metadata:
        return (("authorization", f"Bearer {who.token}"),) if who.token else ()

    def _call(self, rpc: Callable[..., T], request: object, who: Credentials,
              timeout: float = READ_TIMEOUT) -> T:
        if timeout == READ_TIMEOUT:
            timeout = max(LEAST_READ_TIMEOUT, min(READ_TIMEOUT, time_left(READ_TIMEOUT)))
        try:
            return rpc(request, timeout=timeout, metadata=self._metadata(who))
        except grpc.RpcError as exc:
            trailing = cast("Iterable[tuple[str, str | bytes]]",
                            exc.trailing_metadata() or ())
            fields = [v.decode(errors="replace") if isinstance(v, bytes) else v
                      for k, v in trailing if k == "cronlog-field"]
            code = exc.code()
            raise ApiRefused(code.name, exc.details() or "no details",
                             ", ".join(fields)) from None

    def probe_open(self) -> bool:
        """Asked at most once per PROBE_SECONDS (a failed ask is not remembered)."""
        with self._probe_lock:
            now = self._monotonic()
            if self._probed is not None and now - self._probed[0] < PROBE_SECONDS:
                return self._probed[1]
            try:
                self._call(self._stub.ListJobs, pb.ListJobsRequest(page_size=1),
                           Credentials(None, ""))
                is_open = True
            except ApiRefused as exc:
                if exc.code != "UNAUTHENTICATED":
                    raise
                is_open = False
            self._probed = (now, is_open)
            return is_open

    def list_jobs(self, who: Credentials, page_size: int, page_token: str,
                  query: JobQuery = ANY_JOB) -> JobPage:
        answer = self._call(self._stub.ListJobs, pb.ListJobsRequest(
            tenant=who.tenant if who.token is None else "", page_size=page_size,
            page_token=page_token,
            # A status the api does not know goes as UNSPECIFIED, which it refuses by name.
            statuses=[JOB_STATUS_PB.get(s, pb.JOB_STATUS_UNSPECIFIED) for s in query.statuses],
            queue=query.queue, name_contains=query.name_contains,
            labels=[pb.LabelSelector(key=k) if v is None else pb.LabelSelector(key=k, value=v)
                    for k, v in query.labels]), who)
        return JobPage([job_summary(j) for j in answer.jobs], answer.next_page_token)

    def get_job(self, who: Credentials, job_id: str) -> JobSummary:
        return job_summary(self._call(self._stub.GetJob, pb.GetJobRequest(job_id=job_id), who).job)

    def create_job(self, who: Credentials, request_id: str, job: NewJob) -> JobSummary:
        spec = pb.JobSpec(name=job.name, tenant=who.tenant if who.token is None else "",
                          queue=job.queue, handler=job.handler, payload=job.payload,
                          cron=job.cron, time_zone=job.time_zone, labels=dict(job.labels))
        answer = self._call(self._stub.CreateJob,
                            pb.CreateJobRequest(request_id=request_id, spec=spec), who,
                            WRITE_TIMEOUT)
        return job_summary(answer.job)

    def pause_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary:
        return job_summary(self._call(self._stub.PauseJob, pb.PauseJobRequest(
            request_id=request_id, job_id=job_id), who, WRITE_TIMEOUT).job)

    def resume_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary:
        return job_summary(self._call(self._stub.ResumeJob, pb.ResumeJobRequest(
            request_id=request_id, job_id=job_id), who, WRITE_TIMEOUT).job)

    def delete_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary:
        return job_summary(self._call(self._stub.DeleteJob, pb.DeleteJobRequest(
            request_id=request_id, job_id=job_id), who, WRITE_TIMEOUT).job)

    def trigger_job(self, who: Credentials, request_id: str, job_id: str) -> RunSummary:
        return run_summary(self._call(self._stub.TriggerJob, pb.TriggerJobRequest(
            request_id=request_id, job_id=job_id), who, WRITE_TIMEOUT).run)

    def update_job(self, who: Credentials, request_id: str, job_id: str,
                   spec_fingerprint: str, change: JobChange) -> JobSummary:
        # On top of the job as read, as `cronlog jobs update` does: what the form does not
        # show keeps its value. Refused when the spec is no longer the one the form was
        # filled from; the version read here (it moves with every fire) guards the moment
        # between this read and the update.
        current = self._call(self._stub.GetJob, pb.GetJobRequest(job_id=job_id), who).job
        if spec_fingerprint != fingerprint(current.spec):
            raise ApiRefused("FAILED_PRECONDITION", f"job {job_id} was changed since the form "
                             "was filled: look at it again", "spec_fingerprint")
        spec = pb.JobSpec()
        spec.CopyFrom(current.spec)
        spec.name, spec.handler, spec.queue = change.name, change.handler, change.queue
        spec.time_zone, spec.payload = change.time_zone, change.payload
        if change.cron is not None and spec.WhichOneof("schedule") == "cron":
            spec.cron = change.cron
        spec.labels.clear()
        spec.labels.update(change.labels)
        return job_summary(self._call(self._stub.UpdateJob, pb.UpdateJobRequest(
            request_id=request_id, job_id=job_id, expected_version=current.version,
            spec=spec), who, WRITE_TIMEOUT).job)

    def backfill_job(self, who: Credentials, request_id: str, job_id: str, start: datetime,
                     end: datetime) -> Sequence[str]:
        request = pb.BackfillJobRequest(request_id=request_id, job_id=job_id)
        getattr(request, "from").FromDatetime(start)
        request.until.FromDatetime(end)
        return list(self._call(self._stub.BackfillJob, request, who, WRITE_TIMEOUT).run_ids)

    def list_runs(self, who: Credentials, job_id: str, page_size: int,
                  page_token: str) -> RunPage:
        answer = self._call(self._stub.ListRuns, pb.ListRunsRequest(
            job_id=job_id, tenant=who.tenant if who.token is None else "",
            page_size=page_size, page_token=page_token), who)
        return RunPage([run_summary(r) for r in answer.runs], answer.next_page_token)

    def get_run(self, who: Credentials, run_id: str) -> RunSummary:
        return run_summary(self._call(self._stub.GetRun, pb.GetRunRequest(run_id=run_id), who).run)

    def cancel_run(self, who: Credentials, request_id: str, run_id: str) -> RunSummary:
        return run_summary(self._call(self._stub.CancelRun, pb.CancelRunRequest(
            request_id=request_id, run_id=run_id), who, WRITE_TIMEOUT).run)

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
        answer = self._call(self._stub.PreviewSchedule, request, who)
        return [t.ToDatetime(tzinfo=UTC) for t in answer.fire_times]
