"""How the `cronlog` CLI shows answers and errors: JSON for scripts, tables for people."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, timedelta
from typing import TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from google.protobuf.duration_pb2 import Duration
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from cronlog.cli.alerts import delivery_table
from cronlog.cli.calendar_output import calendar_table, job_calendar_table
from cronlog.cli.channels import channel_table
from cronlog.cli.dead_letters import dead_letter_table
from cronlog.cli.history import history_table
from cronlog.cli.tables import (
    ABSENT,
    Row,
    instant,
    printable,
    table,
    with_next_page,
)
from cronlog.v1 import job_service_pb2 as pb

OUTPUT_FORMATS = ("json", "table")
EnumValue = TypeVar("EnumValue", bound=int)


def render(message: Message, output_format: str, time_zone: str | None = None) -> str:
    """The answer as the user asked for it; time_zone adds local times to a preview."""
    if output_format == "table":
        return as_table(message, time_zone)
    return as_json(message)


def as_json(message: Message) -> str:
    return json.dumps(MessageToDict(message, preserving_proto_field_name=True),
                      indent=2, sort_keys=True)


def as_table(message: Message, time_zone: str | None = None) -> str:
    """Jobs, runs, run ids and fire times as aligned columns; any other answer as JSON."""
    if isinstance(message, pb.ListJobsResponse):
        return with_next_page(table(JOB_COLUMNS, map(_job_row, message.jobs)),
                              message.next_page_token)
    if isinstance(message, JOB_ANSWERS):
        shown = table(JOB_COLUMNS, [_job_row(message.job)])
        if message.job.spec.HasField("after"):
            shown += "\n\n" + table(UPSTREAM_JOB_COLUMNS, _upstream_job_rows(message.job.spec))
        excluded = job_calendar_table(message.job)
        return shown + ("\n\n" + excluded if excluded else "")
    if isinstance(message, pb.ListRunsResponse):
        return with_next_page(table(RUN_COLUMNS, map(_run_row, message.runs)),
                              message.next_page_token)
    if isinstance(message, RUN_ANSWERS):
        shown = table(RUN_COLUMNS, [_run_row(message.run)])
        if message.run.attempts:
            shown += "\n\n" + table(ATTEMPT_COLUMNS, map(_attempt_row, message.run.attempts))
        if message.run.upstream_run_ids or message.run.cascade or message.run.depth:
            shown += "\n\n" + table(CHAIN_COLUMNS, _chain_rows(message.run))
        return shown
    if isinstance(message, pb.BackfillJobResponse):
        return table(("RUN ID",), ([run_id] for run_id in message.run_ids))
    if isinstance(message, pb.CreateJobsResponse):
        return table(("REQUEST ID", "JOB ID", "OUTCOME", "FIELD"), (
            (r.request_id, r.job.job_id, "existed" if r.job.already_existed else "created", "")
            if r.HasField("job") else
            (r.request_id, "", f"{r.error.code}: {r.error.message}", r.error.field)
            for r in message.results))
    if isinstance(message, pb.ListWorkersResponse):
        return table(WORKER_COLUMNS, (
            (w.worker_id, w.host, ", ".join(w.queues), ", ".join(w.handlers),
             f"{w.slots_in_use}/{w.slots}", w.version, instant(w.last_seen))
            for w in message.workers))
    if isinstance(message, pb.PreviewScheduleResponse):
        if message.explained:
            return _explained(message, time_zone)
        return _fire_times(message.fire_times, time_zone)
    return (calendar_table(message) or channel_table(message) or dead_letter_table(message)
            or delivery_table(message) or history_table(message) or as_json(message))


JOB_ANSWERS = (pb.CreateJobResponse, pb.GetJobResponse, pb.UpdateJobResponse,
               pb.PauseJobResponse, pb.ResumeJobResponse, pb.DeleteJobResponse,
               pb.RestoreJobResponse)
RUN_ANSWERS = (pb.GetRunResponse, pb.TriggerJobResponse, pb.CancelRunResponse,
               pb.RedriveRunResponse)
JOB_COLUMNS = ("JOB ID", "NAME", "TENANT", "STATUS", "SCHEDULE", "TIME ZONE", "NEXT FIRE",
               "VERSION")
RUN_COLUMNS = ("RUN ID", "JOB ID", "TENANT", "STATUS", "TRIGGER", "SCHEDULED", "LOGICAL TIME",
               "START LAG", "ATTEMPTS", "REASON")
UPSTREAM_JOB_COLUMNS = ("RUNS AFTER JOB", "ON", "WAIT WINDOW")
# A run's place in a chain of dependent jobs: one line per upstream run it follows.
CHAIN_COLUMNS = ("DEPTH", "CASCADE", "UPSTREAM RUN")
SCHEDULED_CHAIN = "scheduled"
WORKER_COLUMNS = ("WORKER", "HOST", "QUEUES", "HANDLERS", "SLOTS IN USE", "VERSION",
                  "LAST SEEN")
ATTEMPT_COLUMNS = ("#", "STATUS", "WORKER", "STARTED", "FINISHED", "START LAG", "PROGRESS",
                   "PROGRESS AT", "ERROR")


def _job_row(job: pb.Job) -> Row:
    spec = job.spec
    schedule = spec.cron if spec.WhichOneof("schedule") == "cron" else (
        "at " + instant(spec.at) if spec.HasField("at") else
        "every " + _every(spec.every) if spec.HasField("every") else
        _after(spec.after) if spec.HasField("after") else ABSENT)
    return (job.job_id, spec.name, spec.tenant, _enum(pb.JobStatus.Name, job.status), schedule,
            spec.time_zone or "UTC", instant(job.next_fire_at), str(job.version))


def _after(after: pb.Dependency) -> str:
    jobs = len(after.job_ids)
    return f"after {jobs} job{'s' if jobs != 1 else ''} on {_condition(after.condition)}"


def _condition(condition: pb.DependencyCondition.ValueType) -> str:
    if condition == pb.DEPENDENCY_CONDITION_UNSPECIFIED:
        return "success"
    try:
        return pb.DependencyCondition.Name(condition).removeprefix(
            "DEPENDENCY_CONDITION_").lower()
    except ValueError:
        return str(condition)  # a condition newer than this client


def _upstream_job_rows(spec: pb.JobSpec) -> list[Row]:
    after = spec.after
    window = _lag(after.wait_window) if after.HasField("wait_window") else ABSENT
    return [(job_id, _condition(after.condition), window) for job_id in after.job_ids]


def _chain_rows(run: pb.Run) -> list[Row]:
    cascade = run.cascade or SCHEDULED_CHAIN
    upstreams = list(run.upstream_run_ids) or [ABSENT]
    return [(str(run.depth), cascade, run_id) for run_id in upstreams]


def _run_row(run: pb.Run) -> Row:
    return (run.run_id, run.job_id, run.tenant, _enum(pb.RunStatus.Name, run.status),
            run.trigger or ABSENT, instant(run.scheduled_at), instant(run.logical_time),
            _lag(run.start_lag) if run.HasField("start_lag") else ABSENT,
            str(len(run.attempts)), run.reason or ABSENT)


def _attempt_row(attempt: pb.Attempt) -> Row:
    return (str(attempt.number), _enum(pb.AttemptStatus.Name, attempt.status),
            attempt.worker or ABSENT, instant(attempt.started_at),
            instant(attempt.finished_at),
            _lag(attempt.start_lag) if attempt.HasField("start_lag") else ABSENT,
            # The handler's own words: cut and made printable like any cell (tables.py).
            attempt.progress.decode(errors="replace") or ABSENT, instant(attempt.progress_at),
            attempt.error or ABSENT)


def _fire_times(fire_times: Iterable[Timestamp], time_zone: str | None) -> str:
    zone = None
    if time_zone and time_zone != "UTC":
        try:
            zone = ZoneInfo(time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            zone = None  # the api accepted it, so only this machine lacks it: show UTC alone
    if zone is None:
        return table(("FIRE TIME (UTC)",), ([instant(t)] for t in fire_times))
    return table(("FIRE TIME (UTC)", f"LOCAL ({time_zone})"),
                 ([instant(t), t.ToDatetime(tzinfo=UTC).astimezone(zone)
                   .strftime("%Y-%m-%d %H:%M:%S %Z")] for t in fire_times))


def _explained(message: pb.PreviewScheduleResponse, time_zone: str | None) -> str:
    """The schedule in words, then each fire time with its wall time, offset and DST note."""
    local = f"LOCAL ({time_zone or 'UTC'})"
    rows = table(("FIRE TIME (UTC)", local, "OFFSET"),
                 ([instant(e.fire_time), e.local_time.replace("T", " "), e.utc_offset]
                  for e in message.explained)).splitlines()
    # The note is the last column and is not cut short like other cells: it is the point.
    notes = ["NOTE"] + ["".join(map(printable, e.note)) for e in message.explained]
    width = max(map(len, rows))
    lines = [(line.ljust(width) + "  " + note).rstrip()
             for line, note in zip(rows, notes, strict=True)]
    description = "".join(map(printable, message.description))
    return description + "\n\n" + "\n".join(lines)


def _every(every: Duration) -> str:
    ms = every.seconds * 1000 + every.nanos // 1_000_000
    for unit_ms, unit in ((86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s")):
        if ms % unit_ms == 0:
            return f"{ms // unit_ms}{unit}"
    return f"{ms}ms"


def _enum(name_of: Callable[[EnumValue], str], number: EnumValue) -> str:
    """RUN_STATUS_DEAD_LETTERED -> dead_lettered: the words `--status` takes."""
    try:
        name = name_of(number)
    except ValueError:
        return str(number)  # a status newer than this client
    return name.split("_STATUS_", 1)[-1].lower()


def _lag(duration: Duration) -> str:
    seconds = duration.ToTimedelta() / timedelta(seconds=1)
    return f"{seconds:.3f}s"
