"""Client subcommands of the `cronlog` CLI: every RPC of the gRPC API from a shell."""

from __future__ import annotations

import argparse
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import grpc
from google.protobuf.json_format import Parse, ParseError
from google.protobuf.message import Message

from cronlog.infra.entrypoints.client_calendars import (
    CalendarUsageError,
    add_calendar_commands,
    add_exclusion_options,
    add_preview_options,
    apply_exclusion_options,
    calendars_command,
    preview_request_options,
)
from cronlog.infra.entrypoints.client_import import add_import_command, run_import
from cronlog.infra.entrypoints.client_job_filters import (
    add_job_filter_options,
    list_jobs_request,
)
from cronlog.infra.entrypoints.client_output import OUTPUT_FORMATS, describe_rpc_error, render
from cronlog.infra.entrypoints.client_token import TokenError, caller_token
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc

DEFAULT_ADDRESS = "127.0.0.1:50051"
RUN_STATUSES = ["", "scheduled", "running", "succeeded", "failed", "cancelled", "missed",
                "skipped", "dead_lettered"]
MISFIRE = {"run_all": pb.MISFIRE_POLICY_RUN_ALL, "run_latest": pb.MISFIRE_POLICY_RUN_LATEST,
           "skip": pb.MISFIRE_POLICY_SKIP}
OVERLAP = {"allow": pb.OVERLAP_POLICY_ALLOW, "skip": pb.OVERLAP_POLICY_SKIP,
           "buffer_one": pb.OVERLAP_POLICY_BUFFER_ONE,
           "cancel_other": pb.OVERLAP_POLICY_CANCEL_OTHER}
CONDITIONS = {"success": pb.DEPENDENCY_CONDITION_SUCCESS,
              "failure": pb.DEPENDENCY_CONDITION_FAILURE, "any": pb.DEPENDENCY_CONDITION_ANY}
# 90, 90s, 15m, 3h, 1d, 1h30m: a number alone is seconds.
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
SECONDS = re.compile(r"\d+(?:\.\d+)?")
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


Metadata = tuple[tuple[str, str | bytes], ...]


class UsageError(ValueError):
    """A command-line value the CLI cannot turn into a request."""


def _spec_options(parser: argparse.ArgumentParser, creating: bool) -> None:
    parser.add_argument("--spec-json", help="a whole JobSpec as protobuf JSON (a file path or "
                                            "the JSON itself); the options below override it")
    parser.add_argument("--name", required=False)
    parser.add_argument("--tenant")
    parser.add_argument("--handler")
    parser.add_argument("--queue", default="default" if creating else None)
    parser.add_argument("--payload", help="handler input (UTF-8 text)")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--cron", help="5 fields, 6 with seconds first, or @hourly etc.")
    when.add_argument("--at", help="ISO-8601 instant of a one-off job, with its offset")
    when.add_argument("--every", metavar="DURATION",
                      help="an interval job: every 90s, 15m, 1h30m, 1d (1 s to 366 days) of "
                           "elapsed time, from --start-at (or on the grid from the Unix epoch)")
    when.add_argument("--after", action="append", metavar="JOB_ID[,JOB_ID]",
                      help="run after these jobs' runs end instead of on a schedule (up to "
                           "16 jobs of the same tenant; repeat or separate with commas)")
    parser.add_argument("--on", dest="on_condition", choices=sorted(CONDITIONS),
                        help="with --after: which upstream ends count (default success)")
    parser.add_argument("--wait-window", metavar="DURATION",
                        help="with --after: how long the first upstream end of a logical "
                             "time waits for the others, e.g. 90s, 15m, 3h, 1d (default 1h)")
    parser.add_argument("--time-zone")
    parser.add_argument("--start-at", help="ISO-8601: no fire time before this")
    parser.add_argument("--end-at", help="ISO-8601: no fire time after this")
    parser.add_argument("--timeout-seconds", type=float)
    parser.add_argument("--heartbeat-timeout-seconds", type=float)
    parser.add_argument("--spread-seconds", type=float)
    parser.add_argument("--start-timeout-seconds", type=float,
                        help="an attempt no worker starts within this long after its time is "
                             "lost and retried (default: the scheduler's, 5 min)")
    parser.add_argument("--max-attempts", type=int)
    parser.add_argument("--initial-backoff-seconds", type=float)
    parser.add_argument("--max-backoff-seconds", type=float)
    parser.add_argument("--backoff-coefficient", type=float)
    parser.add_argument("--jitter", type=float, help="0 (none) to 1 (full jitter)")
    parser.add_argument("--non-retryable", action="append", metavar="ERROR_TYPE")
    parser.add_argument("--misfire-policy", choices=sorted(MISFIRE))
    parser.add_argument("--overlap-policy", choices=sorted(OVERLAP))
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--request-id", help="defaults to a new UUID")
    add_exclusion_options(parser, changing=not creating)


def add_client_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    """Options every client command takes, before the command or after it.

    Only the top level has defaults: a subcommand's default would overwrite what was given
    before the subcommand (argparse copies a subparser's whole namespace over its parent's).
    """
    address = os.environ.get("CRONLOG_GRPC_ADDRESS", DEFAULT_ADDRESS)
    parser.add_argument("--address", default=address if top_level else argparse.SUPPRESS,
                        help="the api's gRPC address (client commands; default "
                             f"$CRONLOG_GRPC_ADDRESS or {DEFAULT_ADDRESS})")
    parser.add_argument("-o", "--output", dest="output_format", choices=OUTPUT_FORMATS,
                        default="json" if top_level else argparse.SUPPRESS,
                        help="json (the default, for scripts) or table (for people)")


def _cascade_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cascade", action="store_true",
                        help="the job's dependents follow these runs, level after level, as "
                             "they follow its scheduled runs (the request id is the chain's "
                             "cascade)")


def add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    add_client_options(common, top_level=False)
    jobs = sub.add_parser("jobs", parents=[common], help="create, change and read jobs"
                          ).add_subparsers(dest="action", required=True)
    _spec_options(jobs.add_parser("create", parents=[common], help="register a job"),
                  creating=True)
    add_import_command(jobs, common)
    update = jobs.add_parser("update", parents=[common],
                             help="change a job's spec (options not given keep their current "
                                  "value)")
    update.add_argument("job_id")
    update.add_argument("--expected-version", type=int, default=None, metavar="N",
                        help="refuse the change unless the job is at version N (default: the "
                             "version just read, so a change made since is not overwritten; "
                             "0 applies it whatever the version)")
    _spec_options(update, creating=False)
    get = jobs.add_parser("get", parents=[common], help="show one job")
    get.add_argument("job_id")
    for action in ("pause", "resume", "delete", "trigger"):
        change = jobs.add_parser(action, parents=[common], help=f"{action} a job")
        change.add_argument("job_id")
        change.add_argument("--request-id", help="defaults to a new UUID")
        if action == "trigger":
            _cascade_option(change)
    backfill = jobs.add_parser("backfill", parents=[common],
                               help="run the fire times of a past interval")
    backfill.add_argument("job_id")
    backfill.add_argument("--from", dest="after", required=True,
                          help="ISO-8601: fire times after this")
    backfill.add_argument("--until", required=True, help="ISO-8601: ...and not after this")
    backfill.add_argument("--request-id", help="defaults to a new UUID")
    _cascade_option(backfill)
    lst = jobs.add_parser("list", parents=[common], help="list jobs")
    lst.add_argument("--tenant", default="")
    lst.add_argument("--page-size", type=int, default=100)
    lst.add_argument("--page-token", default="")
    add_job_filter_options(lst)

    runs = sub.add_parser("runs", parents=[common], help="run history and cancellation"
                          ).add_subparsers(dest="action", required=True)
    rlist = runs.add_parser("list", parents=[common], help="list runs, newest first")
    rlist.add_argument("--job", default="")
    rlist.add_argument("--tenant", default="")
    rlist.add_argument("--status", default="", choices=RUN_STATUSES)
    rlist.add_argument("--scheduled-after", help="ISO-8601")
    rlist.add_argument("--scheduled-before", help="ISO-8601")
    rlist.add_argument("--page-size", type=int, default=20)
    rlist.add_argument("--page-token", default="")
    rget = runs.add_parser("get", parents=[common], help="show one run with its attempts")
    rget.add_argument("run_id")
    cancel = runs.add_parser("cancel", parents=[common],
                             help="cancel a run that is waiting or running")
    cancel.add_argument("run_id")
    cancel.add_argument("--request-id", help="defaults to a new UUID")

    prev = sub.add_parser("preview", parents=[common],
                          help="fire times of a cron expression or an interval, explained")
    prev.add_argument("cron", nargs="?", default="")
    prev.add_argument("--every", metavar="DURATION",
                      help="preview an interval (90s, 15m, 1h30m) instead of a cron expression; "
                           "--start-at is its phase")
    prev.add_argument("--time-zone", default="UTC")
    prev.add_argument("--count", type=int, default=10)
    prev.add_argument("--after", help="ISO-8601 instant (default now)")
    prev.add_argument("--start-at", help="ISO-8601: no fire time before this")
    prev.add_argument("--end-at", help="ISO-8601: no fire time after this")
    add_preview_options(prev)
    add_calendar_commands(sub, common)


def _instant(value: str, option: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{option}: {value!r} is not an ISO-8601 instant") from None
    if parsed.tzinfo is None:
        raise UsageError(f"{option}: {value!r} needs an offset, e.g. +00:00")
    return parsed


def duration(value: str, option: str) -> timedelta:
    """90, 90s, 15m, 3h, 1d or a sum like 1h30m."""
    text = value.strip()
    parts = DURATION_PART.findall(text if not SECONDS.fullmatch(text) else text + "s")
    if not parts or "".join(n + u for n, u in parts) not in (text, text + "s"):
        raise UsageError(f"{option}: {value!r} is not a duration like 90s, 15m, 3h or 1h30m")
    try:
        return timedelta(seconds=sum(float(n) * DURATION_UNITS[u] for n, u in parts))
    except OverflowError:
        raise UsageError(f"{option}: {value!r} is too long") from None


def _after(args: argparse.Namespace, spec: pb.JobSpec, was_scheduled: bool) -> None:
    """--after, --on and --wait-window onto the spec. Switching a job to --after drops the
    bounds and zone its schedule had, unless given again: a dependent job has none."""
    if args.after:
        ids = [i.strip() for value in args.after for i in value.split(",") if i.strip()]
        if not ids:
            raise UsageError("--after: name at least one job id")
        spec.after.ClearField("job_ids")
        spec.after.job_ids.extend(ids)
        if was_scheduled:
            for option in ("start_at", "end_at"):
                if not getattr(args, option):
                    spec.ClearField(option)
            if args.time_zone is None:
                spec.time_zone = "UTC"
    elif (args.on_condition or args.wait_window) and spec.WhichOneof("schedule") != "after":
        raise UsageError("--on and --wait-window go with --after")
    if args.on_condition:
        spec.after.condition = CONDITIONS[args.on_condition]
    if args.wait_window:
        spec.after.wait_window.FromTimedelta(duration(args.wait_window, "--wait-window"))


def _spec(args: argparse.Namespace, base: pb.JobSpec | None = None) -> pb.JobSpec:
    """The spec from --spec-json or base, with every option given on the command line."""
    spec = pb.JobSpec()
    if base is not None:
        spec.CopyFrom(base)
    if args.spec_json:
        text = args.spec_json
        if not text.lstrip().startswith("{"):
            try:
                text = Path(text).read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"--spec-json: cannot read {text!r}: {exc}") from None
        try:
            Parse(text, spec)
        except ParseError as exc:
            raise UsageError(f"--spec-json: {exc}") from None
    for option in ("name", "tenant", "handler", "queue", "time_zone"):
        value = getattr(args, option)
        if value is not None:
            setattr(spec, option, value)
    if args.payload is not None:
        spec.payload = args.payload.encode()
    was_scheduled = spec.WhichOneof("schedule") in ("cron", "at", "every")
    if args.cron:
        spec.cron = args.cron
    elif args.at:
        spec.at.FromDatetime(_instant(args.at, "--at"))
    elif args.every:
        spec.every.FromTimedelta(duration(args.every, "--every"))
    if args.start_at:
        spec.start_at.FromDatetime(_instant(args.start_at, "--start-at"))
    if args.end_at:
        spec.end_at.FromDatetime(_instant(args.end_at, "--end-at"))
    durations: dict[str, Callable[[], Any]] = {
        "timeout_seconds": lambda: spec.timeout,
        "heartbeat_timeout_seconds": lambda: spec.heartbeat_timeout,
        "spread_seconds": lambda: spec.spread,
        "start_timeout_seconds": lambda: spec.start_timeout,
        "initial_backoff_seconds": lambda: spec.retry_policy.initial_backoff,
        "max_backoff_seconds": lambda: spec.retry_policy.max_backoff,
    }
    for option, field in durations.items():
        value = getattr(args, option)
        if value is not None:
            field().FromMilliseconds(int(value * 1000))
    if args.max_attempts is not None:
        spec.retry_policy.max_attempts = args.max_attempts
    if args.backoff_coefficient is not None:
        spec.retry_policy.coefficient = args.backoff_coefficient
    if args.jitter is not None:
        spec.retry_policy.jitter = args.jitter
    if args.non_retryable:
        spec.retry_policy.ClearField("non_retryable_errors")
        spec.retry_policy.non_retryable_errors.extend(args.non_retryable)
    if args.misfire_policy:
        spec.misfire_policy = MISFIRE[args.misfire_policy]
    if args.overlap_policy:
        spec.overlap_policy = OVERLAP[args.overlap_policy]
    for label in args.label:
        key, sep, value = label.partition("=")
        if not sep:
            raise UsageError(f"--label: {label!r} is not KEY=VALUE")
        spec.labels[key] = value
    apply_exclusion_options(args, spec)
    _after(args, spec, was_scheduled)
    return spec


def _request_id(args: argparse.Namespace) -> str:
    return str(args.request_id or uuid.uuid4())


def _channel(address: str) -> grpc.Channel:
    ca_file = os.environ.get("CRONLOG_TLS_CA")
    if ca_file:
        try:
            ca = Path(ca_file).read_bytes()
        except OSError as exc:
            raise UsageError(f"CRONLOG_TLS_CA: cannot read {ca_file!r}: {exc}") from None
        credentials = grpc.ssl_channel_credentials(ca)
        return grpc.secure_channel(address, credentials)
    return grpc.insecure_channel(address)


def update_request(args: argparse.Namespace, current: pb.Job) -> pb.UpdateJobRequest:
    """The options given, applied on top of the job as read. It carries the version read, so
    a change that reaches the job in between is refused rather than silently overwritten."""
    expected = current.version if args.expected_version is None else args.expected_version
    return pb.UpdateJobRequest(request_id=_request_id(args), job_id=args.job_id,
                               expected_version=expected, spec=_spec(args, current.spec))


def _jobs(stub: pb_grpc.JobServiceStub, args: argparse.Namespace,
          metadata: Metadata) -> Message:
    action = args.action
    if action == "create":
        return stub.CreateJob(pb.CreateJobRequest(request_id=_request_id(args),
                                                  spec=_spec(args)),
                              timeout=30, metadata=metadata)
    if action == "update":
        current = stub.GetJob(pb.GetJobRequest(job_id=args.job_id), timeout=10,
                              metadata=metadata).job
        return stub.UpdateJob(update_request(args, current), timeout=30, metadata=metadata)
    if action in ("pause", "resume", "delete", "trigger"):
        request_id, job_id = _request_id(args), args.job_id
        if action == "pause":
            return stub.PauseJob(pb.PauseJobRequest(request_id=request_id, job_id=job_id),
                                 timeout=30, metadata=metadata)
        if action == "resume":
            return stub.ResumeJob(pb.ResumeJobRequest(request_id=request_id, job_id=job_id),
                                  timeout=30, metadata=metadata)
        if action == "delete":
            return stub.DeleteJob(pb.DeleteJobRequest(request_id=request_id, job_id=job_id),
                                  timeout=30, metadata=metadata)
        return stub.TriggerJob(pb.TriggerJobRequest(request_id=request_id, job_id=job_id,
                                                    cascade=args.cascade),
                               timeout=30, metadata=metadata)
    if action == "backfill":
        request = pb.BackfillJobRequest(request_id=_request_id(args), job_id=args.job_id,
                                        cascade=args.cascade)
        getattr(request, "from").FromDatetime(_instant(args.after, "--from"))
        request.until.FromDatetime(_instant(args.until, "--until"))
        return stub.BackfillJob(request, timeout=60, metadata=metadata)
    if action == "get":
        return stub.GetJob(pb.GetJobRequest(job_id=args.job_id), timeout=10, metadata=metadata)
    return stub.ListJobs(list_jobs_request(args), timeout=10, metadata=metadata)


def _runs(stub: pb_grpc.JobServiceStub, args: argparse.Namespace,
          metadata: Metadata) -> Message:
    if args.action == "get":
        return stub.GetRun(pb.GetRunRequest(run_id=args.run_id), timeout=10, metadata=metadata)
    if args.action == "cancel":
        return stub.CancelRun(pb.CancelRunRequest(request_id=_request_id(args),
                                                  run_id=args.run_id),
                              timeout=30, metadata=metadata)
    status = (pb.RunStatus.Value(f"RUN_STATUS_{args.status.upper()}") if args.status
              else pb.RUN_STATUS_UNSPECIFIED)
    request = pb.ListRunsRequest(job_id=args.job, tenant=args.tenant, status=status,
                                 page_size=args.page_size, page_token=args.page_token)
    if args.scheduled_after:
        request.scheduled_after.FromDatetime(_instant(args.scheduled_after,
                                                      "--scheduled-after"))
    if args.scheduled_before:
        request.scheduled_before.FromDatetime(_instant(args.scheduled_before,
                                                       "--scheduled-before"))
    return stub.ListRuns(request, timeout=10, metadata=metadata)


def _preview(stub: pb_grpc.JobServiceStub, args: argparse.Namespace,
             metadata: Metadata) -> Message:
    if bool(args.cron) == bool(args.every):
        raise UsageError("preview: give a cron expression or --every, one of them")
    request = pb.PreviewScheduleRequest(cron=args.cron, time_zone=args.time_zone,
                                        count=args.count)
    if args.every:
        request.every.FromTimedelta(duration(args.every, "--every"))
    for option in ("after", "start_at", "end_at"):
        value = getattr(args, option)
        if value:
            getattr(request, option).FromDatetime(_instant(value, "--" + option.replace("_", "-")))
    preview_request_options(args, request)
    return stub.PreviewSchedule(request, timeout=10, metadata=metadata)


def run_client(args: argparse.Namespace) -> int:
    """Answers go to stdout; errors go to stderr alone, exit 2 for usage, 1 for the api."""
    # The caller's tenant token, when the api requires one (see docs/security.md).
    try:
        token = caller_token(os.environ)
    except TokenError as exc:
        print(f"cronlog: error: {exc}", file=sys.stderr)
        return 2
    metadata: Metadata = (("authorization", f"Bearer {token}"),) if token else ()
    commands = {"jobs": _jobs, "runs": _runs, "preview": _preview,
                "calendars": calendars_command}
    if args.command == "jobs" and args.action == "import":
        return run_import(args, metadata, _channel)
    prog = " ".join(["cronlog", args.command, getattr(args, "action", "")]).rstrip()
    try:
        with _channel(args.address) as channel:
            answer = commands[args.command](pb_grpc.JobServiceStub(channel), args, metadata)
    except (UsageError, CalendarUsageError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except grpc.RpcError as exc:
        code = exc.code()
        # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
        trailing = cast("Iterable[tuple[str, str | bytes]]", exc.trailing_metadata() or ())
        print(f"{prog}: error: " + describe_rpc_error(code.name, exc.details(), trailing),
              file=sys.stderr)
        if prog == "cronlog jobs update" and code == grpc.StatusCode.FAILED_PRECONDITION:
            print(f"hint: the job is not as this update expected it (changed since it was "
                  f"read, or deleted); `cronlog jobs get {args.job_id}` shows it now, and "
                  f"running the update again applies yours on top of it", file=sys.stderr)
        return 1
    time_zone = args.time_zone if args.command == "preview" else None
    print(render(answer, args.output_format, time_zone))
    return 0
