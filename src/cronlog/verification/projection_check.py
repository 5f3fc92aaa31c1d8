"""The projections against the log (issue 38): each job's row in the state store must be
what its events imply — its version, status, next and last fire times — unless the store
already holds a newer version (events written after the log was read).

Cost: one comparison per job verified; the caller reads the rows (in pages) and may read
them again while a running service's apply catches up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from cronlog.verification.findings import Check, Violation


@dataclass(frozen=True)
class JobState:
    version: int
    status: str
    next_fire_at: datetime | None
    last_fired_at: datetime | None


def state_of(job: Any) -> JobState:
    """What the state store should hold of a job replayed from its events."""
    return JobState(int(job.version), str(job.status), job.next_fire_at, job.last_fired_at)


def _shown(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def compare_job_rows(expected: Mapping[str, tuple[str, JobState]],
                     live: Mapping[str, JobState]) -> list[Violation]:
    """`expected`: each job's tenant and state from the log; `live`: the rows read."""
    found: list[Violation] = []
    for job_id, (tenant, state) in sorted(expected.items()):
        row = live.get(job_id)
        if row is None:
            found.append(Violation(Check.PROJECTION_DIFFERS, job_id, tenant,
                                   "the state store has no row of the job"))
            continue
        if row.version > state.version:
            continue  # newer than what was read: events written since
        differing = [f.name for f in fields(JobState)
                     if getattr(row, f.name) != getattr(state, f.name)]
        if differing:
            found.append(Violation(
                Check.PROJECTION_DIFFERS, job_id, tenant,
                "the state store's row differs from the job's events: " + "; ".join(
                    f"{name} {_shown(getattr(row, name))} where the log gives "
                    f"{_shown(getattr(state, name))}" for name in differing)))
    return found
