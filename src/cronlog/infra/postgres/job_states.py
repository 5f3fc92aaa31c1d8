"""The state store's rows of jobs as `cronlog verify --projections` compares them with the
log (verification/projection_check.py)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import psycopg

from cronlog.verification.projection_check import JobState

SELECT_JOB_STATES = """
SELECT job_id::text, version, status, next_fire_at, last_fired_at
FROM jobs WHERE job_id = ANY(%(job_ids)s)
"""
# Rows a query, so that a verification of thousands of jobs is a few round trips.
PAGE = 1000


def read_job_states(dsn: str, job_ids: Sequence[str]) -> dict[str, JobState]:
    found: dict[str, JobState] = {}
    with psycopg.connect(dsn) as conn:
        for start in range(0, len(job_ids), PAGE):
            page = [UUID(j) for j in job_ids[start:start + PAGE]]
            for job_id, version, status, next_fire_at, last_fired_at in conn.execute(
                    SELECT_JOB_STATES, {"job_ids": page}):
                found[job_id] = JobState(int(version), status, next_fire_at, last_fired_at)
    return found
