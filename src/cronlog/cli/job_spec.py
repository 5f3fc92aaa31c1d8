"""A job's spec from the command line: `jobs create` and `jobs update` options onto a JobSpec
(on top of the job as read, for an update)."""

from __future__ import annotations

import argparse
import re
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from google.protobuf.json_format import Parse, ParseError

from cronlog.cli.calendars import apply_exclusion_options
from cronlog.cli.notify_options import apply_notify_options
from cronlog.v1 import job_service_pb2 as pb

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


class UsageError(ValueError):
    """A command-line value the CLI cannot turn into a request."""


def instant(value: str, option: str) -> datetime:
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


def job_spec(args: argparse.Namespace, base: pb.JobSpec | None = None) -> pb.JobSpec:
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
        spec.at.FromDatetime(instant(args.at, "--at"))
    elif args.every:
        spec.every.FromTimedelta(duration(args.every, "--every"))
    if args.start_at:
        spec.start_at.FromDatetime(instant(args.start_at, "--start-at"))
    if args.end_at:
        spec.end_at.FromDatetime(instant(args.end_at, "--end-at"))
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
    apply_notify_options(args, spec, duration)
    _after(args, spec, was_scheduled)
    return spec


def request_id(args: argparse.Namespace) -> str:
    return str(args.request_id or uuid.uuid4())


def update_request(args: argparse.Namespace, current: pb.Job) -> pb.UpdateJobRequest:
    """The options given, applied on top of the job as read. It carries the version read, so
    a change that reaches the job in between is refused rather than silently overwritten."""
    expected = current.version if args.expected_version is None else args.expected_version
    return pb.UpdateJobRequest(request_id=request_id(args), job_id=args.job_id,
                               expected_version=expected, spec=job_spec(args, current.spec))

