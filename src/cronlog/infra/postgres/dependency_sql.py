"""The SQL of the dependency projection (jobs.dependents, dependency_ends,
dependency_settled; schema.sql) and of the owner's reads of it."""

from __future__ import annotations

SET_DEPENDENTS = "UPDATE jobs SET dependents = %(dependents)s WHERE job_id = %(job_id)s"

# An end of a logical time that has settled already is not waiting: its settlement may be
# applied first (a catch-up reads the job and run events in either order).
INSERT_WAITING_END = """
INSERT INTO dependency_ends (job_id, partition, logical_time, cascade, upstream_job_id,
                             upstream_run_id, status, depth, opened_at)
SELECT %(job_id)s, %(partition)s, %(logical_time)s, %(cascade)s, %(upstream_job_id)s,
       %(upstream_run_id)s, %(status)s, %(depth)s, %(opened_at)s
WHERE NOT EXISTS (SELECT 1 FROM dependency_settled s
                  WHERE s.job_id = %(job_id)s AND s.logical_time = %(logical_time)s
                    AND s.cascade = %(cascade)s)
ON CONFLICT DO NOTHING
"""

INSERT_SETTLED = """
INSERT INTO dependency_settled (job_id, partition, logical_time, cascade, settled_at,
                                upstream_run_ids)
VALUES (%(job_id)s, %(partition)s, %(logical_time)s, %(cascade)s, %(settled_at)s,
        %(upstream_run_ids)s)
ON CONFLICT DO NOTHING
"""

DELETE_SETTLED_ENDS = """
DELETE FROM dependency_ends
WHERE job_id = %(job_id)s AND logical_time = %(logical_time)s AND cascade = %(cascade)s
"""

# Settled logical times are needed for one wait window (at most 7 days); a day more is kept.
PRUNE_SETTLED = """
DELETE FROM dependency_settled
WHERE job_id = %(job_id)s AND settled_at < %(settled_at)s - interval '8 days'
"""

SELECT_WAITING_ENDS = """
SELECT logical_time, cascade, upstream_job_id, upstream_run_id, status, depth, opened_at
FROM dependency_ends WHERE job_id = %(job_id)s
"""

SELECT_SETTLED = """
SELECT logical_time, cascade, settled_at, upstream_run_ids
FROM dependency_settled WHERE job_id = %(job_id)s
ORDER BY settled_at
"""

# The dependent jobs of some partitions with logical times waiting, and the earliest one.
WAITING_FAN_INS = """
SELECT partition, job_id, min(opened_at) FROM dependency_ends
WHERE partition = ANY(%(partitions)s)
GROUP BY partition, job_id
"""

# Jobs of some partitions whose run ends are sent to dependents.
JOBS_WITH_DEPENDENTS = """
SELECT partition, job_id FROM jobs
WHERE partition = ANY(%(partitions)s) AND dependents <> '{}' AND status <> 'deleted'
"""
