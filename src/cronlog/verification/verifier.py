"""`cronlog verify`'s proof over a tenant (or every tenant) and a window, from the log's
events alone (docs/verify.md): each job's fire chain (fire_chain.py), then its runs against
it (run_ledger.py).

Cost: one pass over the events given, per job; at most MAX_JOBS jobs a verification (the
jobs that could fire in the window: created before its end, not deleted before its start).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronlog.domain.catalogue import JobEvent
from cronlog.verification.dependency_ledger import check_dependency_runs
from cronlog.verification.findings import JobVerdict, Tally, Violation
from cronlog.verification.fire_chain import ToEvent, check_not_stalled, walk_fire_chain
from cronlog.verification.projection_check import JobState, state_of
from cronlog.verification.run_ledger import check_runs, stories
from cronlog.verification.window import Window

Record = Mapping[str, Any]
Events = Sequence[tuple[str, Record]]

MAX_JOBS = 10_000


class TooManyJobs(ValueError):
    """More jobs than one verification covers: narrow it by tenant or job."""


@dataclass
class Verification:
    window: Window
    tenant: str | None
    tally: Tally = field(default_factory=Tally)
    violations: list[Violation] = field(default_factory=list)
    # Each job's tenant and what the state store should hold of it (projection_check.py).
    job_states: dict[str, tuple[str, JobState]] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return not self.violations

    def by_check(self) -> Counter[str]:
        return Counter(str(v.check) for v in self.violations)


def tenant_of(job_events: Events) -> str | None:
    for name, record in job_events:
        if name == JobEvent.CREATED:
            return str(record["spec"]["tenant"])
    return None


def _could_fire_in(job_events: Events, window: Window) -> bool:
    created = next((r["at"] for n, r in job_events if n == JobEvent.CREATED), None)
    if created is None or created >= window.until:
        return False
    # Deleted before the window and not restored since (a restore brings it back).
    deleted = None
    for name, record in job_events:
        if name == JobEvent.DELETED:
            deleted = record["at"]
        elif name == JobEvent.RESTORED:
            deleted = None
    return deleted is None or deleted >= window.since


def jobs_in_scope(job_events: Mapping[str, Events], window: Window, tenant: str | None,
                  job_ids: Iterable[str] = ()) -> list[str]:
    """The jobs a verification covers, by id; TooManyJobs past MAX_JOBS."""
    wanted = set(job_ids)
    found = sorted(job_id for job_id, events in job_events.items()
                   if (not wanted or job_id in wanted)
                   and (tenant is None or tenant_of(events) == tenant)
                   and _could_fire_in(events, window))
    if len(found) > MAX_JOBS:
        raise TooManyJobs(f"{len(found)} jobs could fire in the window, more than the "
                          f"{MAX_JOBS} one verification covers: narrow it with --tenant, "
                          "--job or a shorter window")
    return found


def verify(job_events: Mapping[str, Events], run_events: Mapping[str, Events],
           window: Window, settled_before: datetime, to_event: ToEvent,
           tenant: str | None = None, job_ids: Iterable[str] = ()) -> Verification:
    """`job_events`: every job's events by job id, each in version order; `run_events`:
    the run events by job id, from before the window's start. `settled_before`: what
    should have happened by then has (the log's end less a margin)."""
    result = Verification(window, tenant)
    in_scope = jobs_in_scope(job_events, window, tenant, job_ids)
    runs_of = {job_id: stories(run_events.get(job_id, ())) for job_id in in_scope}
    # Every run read, for the dependency runs' upstreams (which may be of other jobs).
    every_run = {run_id: story for runs in runs_of.values() for run_id, story in runs.items()}
    for job_id in in_scope:
        events = job_events[job_id]
        verdict = JobVerdict(job_id, tenant_of(events) or "")
        verdict.tally.jobs = 1
        chain = walk_fire_chain(events, to_event, window, verdict)
        check_not_stalled(chain, window, settled_before, verdict)
        check_runs(chain, runs_of[job_id], window, settled_before, verdict)
        check_dependency_runs(chain, runs_of[job_id], every_run, window, verdict)
        if chain.job is not None:
            result.job_states[job_id] = (verdict.tenant, state_of(chain.job))
        result.tally.add(verdict.tally)
        result.violations += verdict.violations
    return result
