"""The api's jobs and runs as the console's summaries (console/ports.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

from google.protobuf.timestamp_pb2 import Timestamp

from cronlog.console.ports import AttemptSummary, JobSummary, RunSummary, WhatIfSummary
from cronlog.domain.schedule_words import duration_words
from cronlog.v1 import job_service_pb2 as pb


def _time(message: object, field: str) -> datetime | None:
    if not message.HasField(field):  # type: ignore[attr-defined]
        return None
    ts = cast(Timestamp, getattr(message, field))
    return ts.ToDatetime(tzinfo=UTC)


def _enum(value: int, enum: object, prefix: str) -> str:
    name: str = enum.Name(value)  # type: ignore[attr-defined]
    return name.removeprefix(prefix).lower() if value else ""


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
        dependents=tuple(job.dependent_job_ids),
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
                       _lag(a), a.output, a.output_truncated, a.error, a.progress,
                       _time(a, "progress_at"))
        for a in run.attempts)
    return RunSummary(run.run_id, run.job_id, run.tenant,
                      _enum(run.status, pb.RunStatus, "RUN_STATUS_"), run.trigger,
                      _time(run, "scheduled_at"), _time(run, "started_at"),
                      _time(run, "finished_at"), _lag(run), run.reason, run.idempotency_key,
                      attempts)


def _utc(stamp: Timestamp) -> datetime:
    return stamp.ToDatetime(tzinfo=UTC)


def what_if_summary(answer: pb.WhatIfResponse, since: datetime,
                    until: datetime) -> WhatIfSummary:
    return WhatIfSummary(
        since=since, until=until, current=answer.current_count,
        proposed=answer.proposed_count,
        added=[_utc(t) for t in answer.added], added_count=answer.added_count,
        removed=[_utc(t) for t in answer.removed], removed_count=answer.removed_count,
        late_count=answer.late_count,
        missed=[(_utc(m.fire_time), m.reason) for m in answer.missed],
        missed_count=answer.missed_count, overlapping_count=answer.overlapping_count,
        dst_days=[(d.day, d.change, len(d.fire_times)) for d in answer.dst_days],
        top_of_hour=[(_utc(h.hour), h.change) for h in answer.top_of_hour])
