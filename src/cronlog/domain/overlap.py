"""A job's overlap policy (docs/lifecycle.md, "Overlap policy"): what a new run of a job
does while earlier runs of it are unfinished. One rule for scheduled and dependent runs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from cronlog.domain.policies import OverlapPolicy
from cronlog.domain.run import Run


def run_under_policy(policy: OverlapPolicy, unfinished: list[Run], now: datetime,
                     start: Callable[[bool], Run], skip: Callable[[str], Run],
                     replaced_by: str, waits_too: bool = True) -> list[Run]:
    """Starts a new run (`start(hold)`) or skips it (`skip(reason)`) under the policy, with
    the job's `unfinished` runs (which this keeps current); returns the runs touched.

    ALLOW, or no earlier run: started. SKIP: skipped. BUFFER_ONE: held until the earlier
    ones end, or skipped when one already waits. CANCEL_OTHER: the earlier ones are
    cancelled ("replaced by" `replaced_by`) and the new one starts. `waits_too`: whether a
    skip under BUFFER_ONE says that one run already waits.
    """
    others = [r for r in unfinished if not r.finished]
    unfinished[:] = others
    if policy == OverlapPolicy.ALLOW or not others:
        run = start(False)
        unfinished.append(run)
        return [run]
    busy = ", ".join(f"{r.id} ({r.status})" for r in others[:3])
    if policy == OverlapPolicy.SKIP or (policy == OverlapPolicy.BUFFER_ONE
                                        and any(r.held for r in others)):
        why = ("still going and one run already waits"
               if policy == OverlapPolicy.BUFFER_ONE and waits_too else "still going")
        return [skip(f"overlap policy {policy}: earlier run {busy} {why}")]
    if policy == OverlapPolicy.BUFFER_ONE:
        run = start(True)
        unfinished.append(run)
        return [run]
    # CANCEL_OTHER: the new run replaces the ones still going.
    for other in others:
        other.cancel(f"overlap policy {policy}: replaced by {replaced_by}", now)
    run = start(False)
    unfinished[:] = [run]
    return [*others, run]
