"""`cronlog history verify` and `cronlog history what-if` (issue 38, docs/verify.md): the
api's VerifyHistory and WhatIf, for a tenant with its token (the operator's `cronlog verify`
and `cronlog what-if` read the Kafka log themselves), and their tables."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import Message

from cronlog.cli.job_spec import UsageError, instant
from cronlog.cli.tables import ABSENT, table
from cronlog.cli.tables import instant as shown_instant
from cronlog.client import CronlogClient
from cronlog.v1 import job_service_pb2 as pb

VIOLATION_COLUMNS = ("CHECK", "JOB", "FIRE TIME", "RUN", "DETAIL")
# How many of each what-if list the table shows (the JSON has the api's 100).
SHOWN = 20


def add_history_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                         common: argparse.ArgumentParser) -> None:
    history = sub.add_parser("history", parents=[common],
                             help="prove a tenant's history from the log, or replay a change "
                                  "against it (docs/verify.md)"
                             ).add_subparsers(dest="action", required=True)
    verify = history.add_parser(
        "verify", parents=[common],
        help="every fire time of the tenant's jobs in a window ran exactly once (at most 31 "
             "days); exit 1 on a violation")
    verify.add_argument("--since", required=True, help="the window's start (ISO-8601)")
    verify.add_argument("--until", help="the window's end (default now)")
    verify.add_argument("--job", action="append", default=[], metavar="JOB_ID",
                        dest="job_ids", help="only this job (repeatable, at most 100)")
    verify.add_argument("--tenant", default="",
                        help="the tenant (default: the token's; required without tokens)")
    what_if = history.add_parser(
        "what-if", parents=[common],
        help="a job's real history replayed under a changed spec: fire times added, removed, "
             "late, missed, overlapping")
    what_if.add_argument("job_id")
    what_if.add_argument("--spec", required=True, metavar="CHANGES.json",
                         help="the JobSpec fields that change, as JSON (- reads stdin)")
    what_if.add_argument("--since", required=True, help="the window's start (ISO-8601)")
    what_if.add_argument("--until", help="the window's end (default now)")


def merged_spec(current: pb.JobSpec, changes: Any) -> pb.JobSpec:
    """The spec with each field CHANGES names replaced (a schedule replaces the schedule).
    UsageError naming what is wrong."""
    if not isinstance(changes, dict):
        raise UsageError("--spec: a JSON object of the JobSpec fields that change")
    try:
        changed = ParseDict(changes, pb.JobSpec())
    except ParseError as exc:
        raise UsageError(f"--spec: {exc}") from None
    merged = pb.JobSpec()
    merged.CopyFrom(current)
    for descriptor, _ in changed.ListFields():
        merged.ClearField(descriptor.name)  # type: ignore[arg-type]  # named by the message
    merged.MergeFrom(changed)
    return merged


def read_changes(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        return json.loads(text)
    except OSError as exc:
        raise UsageError(f"--spec: {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--spec: {path}: not JSON ({exc})") from None


def history_command(client: CronlogClient, args: argparse.Namespace) -> Message:
    since = instant(args.since, "--since")
    until = instant(args.until, "--until") if args.until else None
    if args.action == "verify":
        return client.verify_history(since, until, tenant=args.tenant, job_ids=args.job_ids)
    spec = merged_spec(client.get_job(args.job_id).spec, read_changes(args.spec))
    return client.what_if(args.job_id, spec, since, until)


def history_table(message: Message) -> str | None:
    """The table of a VerifyHistory or WhatIf answer; None for any other answer."""
    if isinstance(message, pb.VerifyHistoryResponse):
        tally = message.tally
        head = table(("JOBS", "FIRE TIMES", "MISSED", "RUNS", "ATTEMPTS", "RETRIES", "HOLDS"),
                     [(str(tally.jobs), str(tally.fire_times), str(tally.missed_fire_times),
                       str(tally.runs), str(tally.attempts), str(tally.retries),
                       "yes" if message.holds else "NO")])
        checks = table(("CHECK", "VIOLATIONS"),
                       ((c.check, str(c.violations)) for c in message.checks))
        shown = head + "\n\n" + checks
        if message.violations:
            shown += "\n\n" + table(VIOLATION_COLUMNS, (
                (v.check, v.job_id, shown_instant(v.fire_time) if v.HasField("fire_time")
                 else ABSENT, v.run_id or ABSENT, v.detail) for v in message.violations))
        return shown
    if isinstance(message, pb.WhatIfResponse):
        rows = [("fire times", f"{message.current_count} now, {message.proposed_count} with "
                 "the change" + (" (first 10,000)" if message.truncated else ""))]
        for label, times, count in (("added", message.added, message.added_count),
                                    ("removed", message.removed, message.removed_count)):
            rows.append((label, _listed([shown_instant(t) for t in times], count)))
        for label, items, count in (("run late", message.late, message.late_count),
                                    ("recorded missed", message.missed, message.missed_count),
                                    ("meeting the run before", message.overlapping,
                                     message.overlapping_count)):
            rows.append((label, _listed([shown_instant(i.fire_time) for i in items], count)))
        rows += [(f"DST {d.day} ({d.change})", f"{len(d.fire_times)} fire times")
                 for d in message.dst_days]
        rows += [(f"top of hour {shown_instant(h.hour)}", f"{h.change:+d}")
                 for h in message.top_of_hour[:SHOWN]]
        return table(("WHAT", "WITH THE CHANGE"), rows)
    return None


def _listed(times: list[str], count: int) -> str:
    more = f" and {count - SHOWN} more" if count > SHOWN else ""
    return f"{count}" + (": " + ", ".join(times[:SHOWN]) + more if times else "")
