"""`cronlog what-if JOB_ID --spec CHANGES.json --since TIME`: the job's real history replayed
under its spec with CHANGES, in memory (docs/verify.md, "What if"). CHANGES is a JobSpec in
protobuf's JSON mapping (as `jobs create --spec-json` takes), holding only the fields that
change: each replaces the job's own (a schedule replaces the schedule)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any, TextIO
from uuid import UUID

from cronlog.cli.history import merged_spec, read_changes
from cronlog.cli.job_spec import UsageError, instant
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import NO_EXCLUSIONS, excluded_by
from cronlog.domain.spec import JobSpec, validate_spec
from cronlog.infra.avro.event_mapping import record_to_event
from cronlog.infra.config import Settings
from cronlog.infra.entrypoints.audit import print_gaps, read_job_log
from cronlog.infra.grpc.convert import spec_in, spec_out
from cronlog.infra.kafka.log_gaps import LogGapError
from cronlog.ports import LogUnavailable
from cronlog.verification.findings import JobVerdict
from cronlog.verification.fire_chain import walk_fire_chain
from cronlog.verification.what_if import WhatIf, current_fire_times, history_facts, replay
from cronlog.verification.window import InvalidWindow, Window

# How many of each list are printed (the counts are whole; --json has every one).
SHOWN = 20
BAD_OPTION, CANNOT_SAY = 2, 3


def proposed_spec(current: JobSpec, changes: dict[str, Any]) -> JobSpec:
    """The current spec with each field CHANGES names replaced. InvalidSpec or UsageError
    naming what is wrong."""
    message = merged_spec(spec_out(current), changes)
    if message.tenant != current.tenant:
        raise InvalidSpec("spec.tenant", "a job cannot move to another tenant")
    return validate_spec(spec_in(message))


def _job_id(text: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise UsageError(f"JOB_ID: {text!r} is not a UUID") from None


def _times(values: list[datetime]) -> str:
    shown = ", ".join(v.isoformat() for v in values[:SHOWN])
    more = f" and {len(values) - SHOWN} more" if len(values) > SHOWN else ""
    return (shown + more) or "none"


def print_what_if(result: WhatIf, out: TextIO) -> None:
    window = result.window
    print(f"fire times from {window.since.isoformat()} to {window.until.isoformat()}: "
          f"{len(result.current)} today, {len(result.proposed)} with the change"
          + (" (cut at the first 10,000)" if result.truncated else ""), file=out)
    print(f"  added: {_times(result.added)}", file=out)
    print(f"  removed: {_times(result.removed)}", file=out)
    print(f"  run late (after a pause or an outage of the real history): "
          f"{_times([t for t, _ in result.late])}", file=out)
    print(f"  recorded missed: {_times([t for t, _ in result.missed])}", file=out)
    for t, why in result.missed[:SHOWN]:
        print(f"    {t.isoformat()}: {why}", file=out)
    print(f"  meeting the run before (its real median duration): "
          f"{_times([t for t, _ in result.overlapping])}", file=out)
    if result.overlapping:
        print(f"    {result.overlapping[0][1]}", file=out)
    for day, change, times in result.dst_days:
        print(f"  DST on {day.isoformat()} ({change}): {_times(times)}", file=out)
    load = result.top_of_hour_load()
    busiest = sorted(load.items(), key=lambda item: (-abs(item[1]), item[0]))[:SHOWN]
    print("  at the tops of the hours: " + (", ".join(
        f"{t.isoformat()} {n:+d}" for t, n in busiest) or "no change"), file=out)


def as_json(result: WhatIf) -> dict[str, Any]:
    def iso(values: list[datetime]) -> list[str]:
        return [v.isoformat() for v in values]

    return {"since": result.window.since.isoformat(), "until": result.window.until.isoformat(),
            "current": iso(result.current), "proposed": iso(result.proposed),
            "truncated": result.truncated, "added": iso(result.added),
            "removed": iso(result.removed),
            "late": [{"fire_time": t.isoformat(), "late_s": d.total_seconds()}
                     for t, d in result.late],
            "missed": [{"fire_time": t.isoformat(), "reason": r} for t, r in result.missed],
            "overlapping": [{"fire_time": t.isoformat(), "outcome": o}
                            for t, o in result.overlapping],
            "dst_days": [{"day": d.isoformat(), "change": c, "fire_times": iso(ts)}
                         for d, c, ts in result.dst_days],
            "top_of_hour_load": {t.isoformat(): n for t, n in
                                 sorted(result.top_of_hour_load().items())}}


def run_what_if(settings: Settings, job_id: str, spec_file: str, since: str,
                until: str | None, emit_json: bool) -> int:
    now = datetime.now(UTC)
    try:
        job = _job_id(job_id)
        window = Window(instant(since, "--since"), instant(until, "--until") if until else now)
        changes = read_changes(spec_file)
    except (UsageError, InvalidWindow) as exc:
        print(f"cronlog what-if: error: {exc}", file=sys.stderr)
        return BAD_OPTION
    try:
        job_events, run_events = read_job_log(settings, job, now)
    except LogGapError as exc:
        print_gaps(exc, "what-if")
        return CANNOT_SAY
    except LogUnavailable as exc:
        print(f"cronlog what-if: error: the log cannot be read: {exc}", file=sys.stderr)
        return CANNOT_SAY
    if not job_events:
        print(f"cronlog what-if: error: job {job} has no events in {settings.job_events_topic}",
              file=sys.stderr)
        return BAD_OPTION
    job_events.sort(key=lambda e: int(str(e[1]["version"])))
    chain = walk_fire_chain(job_events, record_to_event, window, JobVerdict(str(job), ""))
    try:
        spec = proposed_spec(chain.job.spec, changes)
    except (InvalidSpec, UsageError) as exc:
        print(f"cronlog what-if: error: {exc}", file=sys.stderr)
        return BAD_OPTION
    calendar = chain.job.calendar if chain.job.calendar is not None and \
        chain.job.calendar.name == spec.calendar else None
    result = replay(history_facts(job_events, run_events, now),
                    current_fire_times(chain, window), spec, window,
                    settings.catch_up_window,
                    lambda s: s.schedule(excluded_by(calendar) if calendar else NO_EXCLUSIONS))
    if emit_json:
        print(json.dumps(as_json(result), indent=2))
    else:
        print_what_if(result, sys.stdout)
    return 0


