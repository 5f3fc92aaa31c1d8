"""The chaos suites' audits of the log: the product's own proof (`cronlog verify`'s,
src/cronlog/verification/) over the events a test read, beside the count audit that lives
in cronlog_dev.bench.log_audit (where the bench's failover workload uses it too), which
checks the fire times the test itself expected."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from cronlog.domain.catalogue import JobEvent
from cronlog.infra.avro.event_mapping import record_to_event
from cronlog.verification.verifier import Verification, verify
from cronlog.verification.window import Window
from cronlog_dev.bench.log_audit import TERMINAL_ATTEMPT, TERMINAL_RUN, LogAudit, audit

__all__ = ["TERMINAL_ATTEMPT", "TERMINAL_RUN", "LogAudit", "audit", "verified"]

JOB_EVENTS = frozenset(JobEvent)


def verified(events: Iterable[tuple[str, Mapping[str, Any]]], since: datetime,
             until: datetime, tenant: str | None = None) -> Verification:
    """`cronlog verify`'s proof over events read from both topics (any order), everything
    settled by now: the test waited for every run to end."""
    job_events: dict[str, list[tuple[str, Mapping[str, Any]]]] = defaultdict(list)
    run_events: dict[str, list[tuple[str, Mapping[str, Any]]]] = defaultdict(list)
    for name, record in events:
        if record.get("job_id") is None:
            continue  # a calendar's or a channel's
        (job_events if name in JOB_EVENTS else run_events)[str(record["job_id"])].append(
            (name, record))
    for listed in job_events.values():
        listed.sort(key=lambda e: int(e[1]["version"]))
    return verify(job_events, run_events, Window(since, until), datetime.now(UTC),
                  record_to_event, tenant)


def describe(result: Verification) -> str:
    """The proof's extent and the first violations, for a test's output."""
    tally = result.tally
    lines = [f"verify: jobs {tally.jobs}, fire times fired {tally.fire_times}, recorded "
             f"missed {tally.missed_fire_times}, runs {tally.runs}, attempts "
             f"{tally.attempts} (retries {tally.retries}), violations "
             f"{len(result.violations)}"]
    lines += [f"  {v.check}: job {v.job_id} at {v.fire_time}: {v.detail}"
              for v in result.violations[:10]]
    return "\n".join(lines)
