"""Protobuf messages to domain values and back, with defaults a user would expect."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from uuid import UUID

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from cronlog.domain.bounds import LONGEST_DURATION, require_in_range
from cronlog.domain.dependency import (
    DEFAULT_WAIT_WINDOW,
    MAX_UPSTREAMS,
    Dependency,
    DependencyCondition,
)
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import MAX_EXCLUSION_RANGES, NO_EXCLUSIONS, Exclusions
from cronlog.domain.notify_rule import LATE_AFTER_FIELD, AlertKind, NotifyRule, notify_rule
from cronlog.domain.policies import MisfirePolicy, OverlapPolicy, RetryPolicy
from cronlog.domain.schedule import LONGEST_INTERVAL
from cronlog.domain.schedule_explained import ExplainedSchedule
from cronlog.domain.spec import JobSpec
from cronlog.projections.history import AttemptRow
from cronlog.projections.state import JobRow
from cronlog.v1 import job_service_pb2 as pb

DEFAULT_QUEUE = "default"
DEFAULTS = JobSpec(name="", tenant="", queue=DEFAULT_QUEUE, handler="")

MISFIRE = {pb.MISFIRE_POLICY_UNSPECIFIED: MisfirePolicy.RUN_LATEST,
           pb.MISFIRE_POLICY_RUN_ALL: MisfirePolicy.RUN_ALL,
           pb.MISFIRE_POLICY_RUN_LATEST: MisfirePolicy.RUN_LATEST,
           pb.MISFIRE_POLICY_SKIP: MisfirePolicy.SKIP}
OVERLAP = {pb.OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy.ALLOW,
           pb.OVERLAP_POLICY_ALLOW: OverlapPolicy.ALLOW,
           pb.OVERLAP_POLICY_SKIP: OverlapPolicy.SKIP,
           pb.OVERLAP_POLICY_BUFFER_ONE: OverlapPolicy.BUFFER_ONE,
           pb.OVERLAP_POLICY_CANCEL_OTHER: OverlapPolicy.CANCEL_OTHER}
CONDITION = {pb.DEPENDENCY_CONDITION_UNSPECIFIED: DependencyCondition.ON_SUCCESS,
             pb.DEPENDENCY_CONDITION_SUCCESS: DependencyCondition.ON_SUCCESS,
             pb.DEPENDENCY_CONDITION_FAILURE: DependencyCondition.ON_FAILURE,
             pb.DEPENDENCY_CONDITION_ANY: DependencyCondition.ON_ANY}
CONDITION_PB = {v: k for k, v in CONDITION.items() if k != pb.DEPENDENCY_CONDITION_UNSPECIFIED}
MISFIRE_PB = {v: k for k, v in MISFIRE.items() if k != pb.MISFIRE_POLICY_UNSPECIFIED}
OVERLAP_PB = {v: k for k, v in OVERLAP.items() if k != pb.OVERLAP_POLICY_UNSPECIFIED}
JOB_STATUS_PB = {"active": pb.JOB_STATUS_ACTIVE, "paused": pb.JOB_STATUS_PAUSED,
                 "completed": pb.JOB_STATUS_COMPLETED, "deleted": pb.JOB_STATUS_DELETED}
RUN_STATUS_PB = {"scheduled": pb.RUN_STATUS_SCHEDULED, "running": pb.RUN_STATUS_RUNNING,
                 "succeeded": pb.RUN_STATUS_SUCCEEDED, "failed": pb.RUN_STATUS_FAILED,
                 "cancelled": pb.RUN_STATUS_CANCELLED, "missed": pb.RUN_STATUS_MISSED,
                 "skipped": pb.RUN_STATUS_SKIPPED, "dead_lettered": pb.RUN_STATUS_DEAD_LETTERED}
RUN_STATUS_NAME = {v: k for k, v in RUN_STATUS_PB.items()}
ATTEMPT_STATUS_PB = {"waiting": pb.ATTEMPT_STATUS_WAITING,
                     "dispatched": pb.ATTEMPT_STATUS_DISPATCHED,
                     "running": pb.ATTEMPT_STATUS_RUNNING,
                     "succeeded": pb.ATTEMPT_STATUS_SUCCEEDED,
                     "failed": pb.ATTEMPT_STATUS_FAILED, "timed_out": pb.ATTEMPT_STATUS_TIMED_OUT,
                     "lost": pb.ATTEMPT_STATUS_LOST, "cancelled": pb.ATTEMPT_STATUS_CANCELLED}


NANOS = 1_000_000_000


def timestamp_in(message: Timestamp, field: str) -> datetime:
    """Any instant a Timestamp can carry (years 1 to 9999): for query filters, where a far
    bound simply means "no bound"."""
    try:
        return message.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidSpec(field, f"not a valid time: {exc}") from exc


def instant_in(message: Timestamp, field: str) -> datetime:
    """An instant cronlog stores or schedules from: within the accepted range
    (domain/bounds.py), or InvalidSpec naming the field."""
    return require_in_range(timestamp_in(message, field), field)


def duration_in(message: Duration, field: str,
                longest_allowed: timedelta = LONGEST_DURATION) -> timedelta:
    """A Duration as protobuf defines it (nanos within a second, of the seconds' sign), no
    longer than any job option takes, or InvalidSpec naming the field. Negative ones pass,
    for the domain to say why they are not accepted; huge ones stop here, before they
    overflow a timedelta."""
    seconds, nanos = message.seconds, message.nanos
    if not -NANOS < nanos < NANOS or (seconds > 0 > nanos) or (seconds < 0 < nanos):
        raise InvalidSpec(field, f"not a valid duration: nanos {nanos} must be within a "
                                 "second and have the sign of seconds")
    longest = int(longest_allowed.total_seconds())
    if seconds > longest:
        raise InvalidSpec(field, f"must be at most {longest_allowed.days} days, "
                                 f"got {seconds}s")
    if seconds < -longest:
        raise InvalidSpec(field, f"must not be negative, got {seconds}s")
    return timedelta(seconds=seconds, microseconds=int(nanos / 1000))


def timestamp_out(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(UTC))
    return ts


def micros_out(value: int) -> Timestamp | None:
    if not value:
        return None
    ts = Timestamp()
    ts.FromMicroseconds(value)
    return ts


def duration_out(value: timedelta) -> Duration:
    d = Duration()
    d.FromTimedelta(value)
    return d


def retry_in(message: pb.RetryPolicy, present: bool) -> RetryPolicy:
    default = RetryPolicy()
    if not present:
        return default
    return RetryPolicy(
        max_attempts=message.max_attempts if message.max_attempts else default.max_attempts,
        initial_backoff=duration_in(message.initial_backoff,
                                    "spec.retry_policy.initial_backoff")
        if message.HasField("initial_backoff") else default.initial_backoff,
        max_backoff=duration_in(message.max_backoff, "spec.retry_policy.max_backoff")
        if message.HasField("max_backoff") else default.max_backoff,
        coefficient=message.coefficient if message.coefficient else default.coefficient,
        jitter=message.jitter if message.HasField("jitter") else default.jitter,
        non_retryable_errors=tuple(message.non_retryable_errors),
    )


# A job id as it appears in an error: enough to recognise it, never a whole request's worth.
MOST_ECHOED_CHARS = 64


def dependency_in(message: pb.Dependency) -> Dependency:
    """The domain's Dependency of spec.after. The number of ids is checked before any is
    parsed, so an oversized list costs nothing; the rest (duplicates, the wait window's
    range) the domain checks."""
    field = "spec.after.job_ids"
    if len(message.job_ids) > MAX_UPSTREAMS:
        raise InvalidSpec(field, f"at most {MAX_UPSTREAMS} upstream jobs, "
                                 f"got {len(message.job_ids)}")
    job_ids: list[UUID] = []
    for value in message.job_ids:
        try:
            job_ids.append(UUID(value))
        except ValueError:
            raise InvalidSpec(field, f"{value[:MOST_ECHOED_CHARS]!r} is not a job id") from None
    if message.condition not in CONDITION:
        raise InvalidSpec("spec.after.condition", f"unknown value {message.condition}")
    return Dependency(
        job_ids=tuple(job_ids), condition=CONDITION[message.condition],
        wait_window=duration_in(message.wait_window, "spec.after.wait_window")
        if message.HasField("wait_window") else DEFAULT_WAIT_WINDOW)


def dependency_out(dependency: Dependency) -> pb.Dependency:
    return pb.Dependency(job_ids=[str(j) for j in dependency.job_ids],
                         condition=CONDITION_PB[DependencyCondition(dependency.condition)],
                         wait_window=duration_out(dependency.wait_window))


def every_in(message: Duration, field: str) -> timedelta:
    """An interval: whole milliseconds (how the log stores it), bounds left to the domain."""
    if message.nanos % 1_000_000:
        raise InvalidSpec(field, f"must be a whole number of milliseconds, got {message.nanos} "
                                 "nanos")
    return duration_in(message, field, LONGEST_INTERVAL)


def exclusions_in(texts: Sequence[str], field: str) -> Exclusions:
    """Excluded days of a request, counted before any is parsed so an oversized list costs
    nothing; each checked by the domain (format, 1970..2099, first <= last)."""
    if len(texts) > MAX_EXCLUSION_RANGES:
        raise InvalidSpec(field, f"at most {MAX_EXCLUSION_RANGES} dates or ranges, got "
                                 f"{len(texts)}")
    return Exclusions.parse(texts, field) if texts else NO_EXCLUSIONS


def spec_in(message: pb.JobSpec) -> JobSpec:
    """The domain spec of a request; validation happens in the domain, not here."""
    which = message.WhichOneof("schedule")
    if message.misfire_policy not in MISFIRE:
        raise InvalidSpec("spec.misfire_policy", f"unknown value {message.misfire_policy}")
    if message.overlap_policy not in OVERLAP:
        raise InvalidSpec("spec.overlap_policy", f"unknown value {message.overlap_policy}")
    return JobSpec(
        name=message.name, tenant=message.tenant, queue=message.queue or DEFAULT_QUEUE,
        handler=message.handler, payload=bytes(message.payload),
        cron=message.cron if which == "cron" else None,
        at=instant_in(message.at, "spec.schedule.at") if which == "at" else None,
        time_zone=message.time_zone or "UTC",
        start_at=instant_in(message.start_at, "spec.start_at")
        if message.HasField("start_at") else None,
        end_at=instant_in(message.end_at, "spec.end_at")
        if message.HasField("end_at") else None,
        timeout=duration_in(message.timeout, "spec.timeout") if message.HasField("timeout")
        else DEFAULTS.timeout,
        heartbeat_timeout=duration_in(message.heartbeat_timeout, "spec.heartbeat_timeout")
        if message.HasField("heartbeat_timeout") else DEFAULTS.heartbeat_timeout,
        retry_policy=retry_in(message.retry_policy, message.HasField("retry_policy")),
        misfire_policy=MISFIRE[message.misfire_policy],
        overlap_policy=OVERLAP[message.overlap_policy],
        labels=dict(message.labels),
        spread=duration_in(message.spread, "spec.spread") if message.HasField("spread")
        else timedelta(0),
        start_timeout=duration_in(message.start_timeout, "spec.start_timeout")
        if message.HasField("start_timeout") else None,
        after=dependency_in(message.after) if which == "after" else None,
        every=every_in(message.every, "spec.schedule.every") if which == "every" else None,
        exclusions=exclusions_in(message.exclusions, "spec.exclusions"),
        calendar=message.calendar or None,
        notify=notify_in(message.notify) if message.HasField("notify") else None,
    )


def notify_in(message: pb.NotifyRule) -> NotifyRule:
    """Bounded by the domain's rule, which counts before it reads each name."""
    return notify_rule(list(message.channels), list(message.on) or None,
                       duration_in(message.late_after, LATE_AFTER_FIELD)
                       if message.HasField("late_after") else None)


def notify_out(rule: NotifyRule) -> pb.NotifyRule:
    return pb.NotifyRule(channels=list(rule.channels),
                         on=[kind.value for kind in AlertKind if kind in rule.on],
                         late_after=duration_out(rule.late_after))


def spec_out(spec: JobSpec) -> pb.JobSpec:
    policy = spec.retry_policy
    message = pb.JobSpec(
        name=spec.name, tenant=spec.tenant, queue=spec.queue, handler=spec.handler,
        payload=spec.payload, time_zone=spec.time_zone,
        start_at=timestamp_out(spec.start_at), end_at=timestamp_out(spec.end_at),
        timeout=duration_out(spec.timeout), heartbeat_timeout=duration_out(spec.heartbeat_timeout),
        retry_policy=pb.RetryPolicy(
            max_attempts=policy.max_attempts, initial_backoff=duration_out(policy.initial_backoff),
            max_backoff=duration_out(policy.max_backoff), coefficient=policy.coefficient,
            jitter=policy.jitter, non_retryable_errors=list(policy.non_retryable_errors)),
        misfire_policy=MISFIRE_PB[spec.misfire_policy],
        overlap_policy=OVERLAP_PB[spec.overlap_policy], labels=dict(spec.labels),
        spread=duration_out(spec.spread), exclusions=spec.exclusions.texts(),
        calendar=spec.calendar or "",
    )
    if spec.start_timeout is not None:
        message.start_timeout.CopyFrom(duration_out(spec.start_timeout))
    if spec.notify is not None:
        message.notify.CopyFrom(notify_out(spec.notify))
    if spec.cron is not None:
        message.cron = spec.cron
    elif spec.at is not None:
        message.at.FromDatetime(spec.at)
    elif spec.after is not None:
        message.after.CopyFrom(dependency_out(spec.after))
    elif spec.every is not None:
        message.every.CopyFrom(duration_out(spec.every))
    return message


def job_out(row: JobRow, spec: JobSpec) -> pb.Job:
    return pb.Job(
        job_id=str(row.job_id), spec=spec_out(spec), status=JOB_STATUS_PB[row.status],
        version=row.revision or row.version, event_version=row.version,
        next_fire_at=timestamp_out(row.next_fire_at),
        last_fired_at=timestamp_out(row.last_fired_at), created_at=timestamp_out(row.created_at),
        updated_at=timestamp_out(row.updated_at),
        dependent_job_ids=[str(j) for j in row.dependents],
    )


def run_out(attempts: Sequence[AttemptRow]) -> pb.Run:
    ordered = sorted(attempts, key=lambda a: a.attempt)
    first, last = ordered[0], ordered[-1]
    real = [a for a in ordered if a.attempt > 0]
    run = pb.Run(
        run_id=first.run_id, job_id=first.job_id, tenant=first.tenant, queue=first.queue,
        handler=first.handler, status=RUN_STATUS_PB.get(last.run_status,
                                                        pb.RUN_STATUS_UNSPECIFIED),
        trigger=first.trigger, scheduled_at=micros_out(first.scheduled_at_us),
        dispatched_at=micros_out(first.dispatched_at_us),
        started_at=micros_out(first.started_at_us), finished_at=micros_out(last.finished_at_us),
        reason=last.reason, idempotency_key=first.run_id,
        upstream_run_ids=list(first.upstream_run_ids),
        logical_time=micros_out(first.logical_time_us or first.scheduled_at_us),
        cascade=first.cascade or "", depth=first.depth,
    )
    if first.started_at_us:
        # Measured from the earliest start the run was given: its fire time plus spread.
        run.start_lag.FromMicroseconds(first.start_lag_us)
    for a in real:
        attempt = run.attempts.add(
            number=a.attempt, status=ATTEMPT_STATUS_PB.get(a.attempt_status,
                                                           pb.ATTEMPT_STATUS_UNSPECIFIED),
            worker=a.worker, dispatched_at=micros_out(a.dispatched_at_us),
            started_at=micros_out(a.started_at_us), finished_at=micros_out(a.finished_at_us),
            output=a.output.encode(), output_truncated=bool(a.output_truncated), error=a.error,
            not_before=micros_out(a.not_before_us), progress=a.progress.encode(),
            progress_at=micros_out(a.progress_at_us))
        if a.started_at_us:
            attempt.start_lag.FromMicroseconds(a.start_lag_us)
    return run


def utc_offset_text(offset: timedelta) -> str:
    sign = "-" if offset < timedelta(0) else "+"
    seconds = abs(int(offset.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


def preview_out(explained: ExplainedSchedule) -> pb.PreviewScheduleResponse:
    response = pb.PreviewScheduleResponse(description=explained.description)
    for item in explained.fire_times:
        response.fire_times.add().FromDatetime(item.fire_time)
        response.explained.append(pb.ExplainedFireTime(
            fire_time=timestamp_out(item.fire_time),
            local_time=item.local_time.isoformat(timespec="seconds"),
            utc_offset=utc_offset_text(item.utc_offset), note=item.note))
    return response
