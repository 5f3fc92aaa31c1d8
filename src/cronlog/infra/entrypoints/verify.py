"""`cronlog verify`: the guarantees proved from the Kafka log for a tenant (or every tenant)
and a window (docs/verify.md). Reads every job event (kept forever) and the run events from
a little before the window's start (infra/kafka/event_log_reads.py); refuses a window the
log no longer holds."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from cronlog.cli.job_spec import UsageError, duration, instant
from cronlog.infra.avro.event_mapping import record_to_event
from cronlog.infra.config import Settings
from cronlog.infra.entrypoints.audit import print_gaps
from cronlog.infra.kafka.event_log_reads import read_scope
from cronlog.infra.kafka.log_gaps import LogGapError
from cronlog.ports import LogUnavailable
from cronlog.verification.findings import Check
from cronlog.verification.history_check import compare_history, expected_history
from cronlog.verification.projection_check import compare_job_rows
from cronlog.verification.verifier import TooManyJobs, Verification, verify
from cronlog.verification.window import InvalidWindow, Window

Events = list[tuple[str, dict[str, Any]]]

# What should have happened by the log's end less this has (attempts ended, fire times
# fired): more than the lookahead and a failover, less than anyone waits for an answer.
DEFAULT_SETTLE = timedelta(minutes=10)
# How long the state store may take to apply what the log holds before a difference counts.
PROJECTIONS_SETTLE_S = 30.0
# Runs of the history read by one query (the query names them).
HISTORY_READ_RUNS = 1000
# Exit statuses: 0 holds, 1 violations found, 2 a bad option, 3 the log cannot say.
HOLDS, VIOLATED, BAD_OPTION, CANNOT_VERIFY = 0, 1, 2, 3


@dataclass(frozen=True)
class VerifyRequest:
    window: Window
    settled_before: datetime
    tenant: str | None
    job_ids: tuple[str, ...]
    report: str | None
    projections: bool = False


def check_projections(settings: Settings, result: Verification,
                      run_events: Mapping[str, Events],
                      within_s: float = PROJECTIONS_SETTLE_S) -> None:
    """The state store's job rows and the run history's rows against the log, read again
    while they differ for at most within_s: a running service applies what the log holds
    within seconds."""
    from cronlog.infra.composition import build_run_history
    from cronlog.infra.postgres.job_states import read_job_states

    job_ids = sorted(result.job_states)
    runs = expected_history(run_events)
    history = build_run_history(settings)
    deadline = time.monotonic() + within_s
    while True:
        found = compare_job_rows(result.job_states,
                                 read_job_states(settings.postgres_dsn, job_ids))
        found += compare_history(runs, _latest_rows(history, sorted(runs)))
        if not found or time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    result.violations += found


def _latest_rows(history: Any, run_ids: list[str]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for start in range(0, len(run_ids), HISTORY_READ_RUNS):
        rows.update(history.latest_attempt_rows(run_ids[start:start + HISTORY_READ_RUNS]))
    return rows


def print_summary(result: Verification, out: TextIO) -> None:
    scope = f"tenant {result.tenant}" if result.tenant else "every tenant"
    tally = result.tally
    print(f"verified {scope}, fire times from {result.window.since.isoformat()} to "
          f"{result.window.until.isoformat()}, from the log", file=out)
    print(f"  jobs {tally.jobs}, fire times fired {tally.fire_times}, recorded missed "
          f"{tally.missed_fire_times}, runs {tally.runs} (manual or backfill "
          f"{tally.manual_runs}, after upstream runs {tally.dependency_runs}), attempts "
          f"{tally.attempts} (retries {tally.retries})", file=out)
    if tally.unjudged_upstreams:
        print(f"  upstream runs not read, so not judged: {tally.unjudged_upstreams}",
              file=out)
    counts = result.by_check()
    width = max(len(str(c)) for c in Check)
    print(f"  {'check':<{width}}  violations", file=out)
    for check in Check:
        print(f"  {check!s:<{width}}  {counts.get(str(check), 0)}", file=out)
    if result.holds:
        print("holds: no violation", file=out)
        return
    print(f"VIOLATED: {len(result.violations)} violations", file=out)
    for violation in result.violations[:20]:
        at = violation.fire_time.isoformat() if violation.fire_time else "-"
        print(f"  {violation.check}: job {violation.job_id} at {at}: {violation.detail}",
              file=out)
    if len(result.violations) > 20:
        print(f"  ... and {len(result.violations) - 20} more (--report FILE has them all)",
              file=out)


def write_report(result: Verification, path: str) -> None:
    """One JSON object a line per violation, with the events that show it."""
    lines = [json.dumps(v.as_dict(), sort_keys=True) for v in result.violations]
    if path == "-":
        for line in lines:
            print(line)
        return
    with open(path, "w", encoding="utf-8") as report:
        report.writelines(line + "\n" for line in lines)


def request_from(since: str, until: str | None, settle: str | None, tenant: str | None,
                 job_ids: Sequence[str], report: str | None, now: datetime,
                 projections: bool = False) -> VerifyRequest:
    """Raises UsageError or InvalidWindow naming the option at fault."""
    settle_by = duration(settle, "--settle") if settle else DEFAULT_SETTLE
    end = instant(until, "--until") if until else now
    if end > now:
        raise UsageError(f"--until: {end.isoformat()} is in the future")
    window = Window(instant(since, "--since"), end)
    return VerifyRequest(window, now - settle_by, tenant or None, tuple(job_ids), report,
                         projections)


def run_verify(settings: Settings, since: str, until: str | None, settle: str | None,
               tenant: str | None, job_ids: Sequence[str], report: str | None,
               projections: bool = False) -> int:
    try:
        request = request_from(since, until, settle, tenant, job_ids, report,
                               datetime.now(UTC), projections)
    except (UsageError, InvalidWindow) as exc:
        print(f"cronlog verify: error: {exc}", file=sys.stderr)
        return BAD_OPTION
    try:
        job_events, run_events = read_scope(settings, request.window, request.tenant,
                                            request.job_ids)
        result = verify(job_events, run_events, request.window, request.settled_before,
                        record_to_event, request.tenant, request.job_ids)
        if request.projections:
            # What settled that long ago has been applied too, within PROJECTIONS_SETTLE_S.
            settle_s = (datetime.now(UTC) - request.settled_before).total_seconds()
            check_projections(settings, result, run_events,
                              min(settle_s, PROJECTIONS_SETTLE_S))
    except LogGapError as exc:
        print_gaps(exc, "verify")
        return CANNOT_VERIFY
    except LogUnavailable as exc:
        print(f"cronlog verify: error: the log cannot be read: {exc}", file=sys.stderr)
        return CANNOT_VERIFY
    except TooManyJobs as exc:
        print(f"cronlog verify: error: {exc}", file=sys.stderr)
        return BAD_OPTION
    print_summary(result, sys.stdout if request.report != "-" else sys.stderr)
    if request.report:
        write_report(result, request.report)
    return HOLDS if result.holds else VIOLATED
