"""A dependent job's runs proved against its upstream runs (invariant 11, issue 16): each run
the dependency made names upstream runs of the jobs its `after` named then, whose ends —
before it was made — meet its condition, and its id is the one derived from them.

Only upstream runs verify read can be judged: another tenant's (verify asked for one) or
one older than the run events read is left unjudged, and counted so.

Cost: per dependency run, one look per upstream run it names (at most the jobs `after`
names, domain/bounds.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from cronlog.domain.catalogue import RunEvent
from cronlog.domain.dependency import dependent_run_id, meets
from cronlog.domain.run_states import CANCELLED, DEAD_LETTERED, SUCCEEDED
from cronlog.verification.findings import Check, JobVerdict, run_evidence
from cronlog.verification.fire_chain import FireChain
from cronlog.verification.run_ledger import RunStory
from cronlog.verification.window import Window

Record = Mapping[str, Any]

_ENDS = {RunEvent.ATTEMPT_SUCCEEDED: SUCCEEDED, RunEvent.SUCCEEDED: SUCCEEDED,
         RunEvent.FAILED: DEAD_LETTERED, RunEvent.CANCELLED: CANCELLED}


def end_before(story: RunStory, instant: datetime) -> str | None:
    """How the run had ended by `instant` (its last end then, a re-drive reopening it)."""
    status: str | None = None
    for name, record in story.events:
        if record["at"] > instant:
            break
        if name == RunEvent.REDRIVEN:
            status = None
        elif name in _ENDS:
            status = _ENDS[RunEvent(name)]
    return status


def check_dependency_runs(chain: FireChain, runs: Mapping[str, RunStory],
                          every_run: Mapping[str, RunStory], window: Window,
                          verdict: JobVerdict) -> None:
    for story in runs.values():
        creations = story.creations
        if not creations:
            continue
        name, created = creations[0]
        if created.get("trigger") != "dependency" or not window.holds(created["scheduled_at"]):
            continue
        verdict.tally.dependency_runs += 1
        upstream_ids = [str(u) for u in created.get("upstream_run_ids") or ()]
        evidence = run_evidence(name, created)
        fire_time = created.get("logical_time") or created["scheduled_at"]
        derived = dependent_run_id(UUID(verdict.job_id), [UUID(u) for u in upstream_ids])
        if not upstream_ids or str(derived) != story.run_id:
            verdict.violate(Check.DEPENDENT_RUN_UNFOUNDED,
                            f"dependency run {story.run_id} names upstream runs "
                            f"{upstream_ids or 'none'}, whose run id would be {derived}",
                            fire_time, story.run_id, (evidence,))
            continue
        if name != RunEvent.SCHEDULED:
            continue  # recorded missed or skipped: it says why, and never ran
        spec = chain.spec_at(created["at"])
        after = spec.after if spec is not None else None
        for upstream_id in upstream_ids:
            upstream = every_run.get(upstream_id)
            if upstream is None or not upstream.creations:
                verdict.tally.unjudged_upstreams += 1
                continue
            upstream_job = str(upstream.creations[0][1]["job_id"])
            status = end_before(upstream, created["at"])
            why = None
            if after is None or upstream_job not in {str(j) for j in after.job_ids}:
                why = f"of job {upstream_job}, which the job's `after` did not name then"
            elif status is None or not meets(after.condition, status):
                why = (f"which had {'not ended' if status is None else 'ended ' + status} "
                       f"when it was made, and the job runs on {after.condition}")
            if why is not None:
                verdict.violate(Check.DEPENDENT_RUN_UNFOUNDED,
                                f"dependency run {story.run_id} follows upstream run "
                                f"{upstream_id}, {why}", fire_time, story.run_id,
                                (evidence, *(run_evidence(n, r)
                                             for n, r in upstream.creations[:1])))
