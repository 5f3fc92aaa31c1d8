"""The SQL of the run history tables (schema.sql): what the projector writes, the columns
of each row, and what the api and the audit read back."""

from __future__ import annotations

from dataclasses import fields

from cronlog.projections.history import AttemptRow, RunEventRow
from cronlog.projections.job_history import (
    DependencyEventRow,
    JobHistoryRow,
    MissedFireTimesRow,
)
from cronlog.projections.job_timeline import JobEventRow

ATTEMPT_COLUMNS = [f.name for f in fields(AttemptRow)]
EVENT_COLUMNS = [f.name for f in fields(RunEventRow)]

INSERT_ATTEMPTS = ("INSERT INTO {db}.runs (scheduled_at, logical_time, "
                   + ", ".join(ATTEMPT_COLUMNS) + ") VALUES")
INSERT_EVENTS = "INSERT INTO {db}.run_events (at, " + ", ".join(EVENT_COLUMNS) + ") VALUES"
SELECT_ATTEMPTS = "SELECT " + ", ".join(ATTEMPT_COLUMNS) + " FROM {db}.runs FINAL"
# run_id is not in the key of `runs`: a run is found there through run_keys (schema.sql),
# whose key it leads, by the columns that lead runs' key. Each of them is a set of its own
# (18.16 narrows the index by each column's set), so the index reads the few granules
# that can hold the runs, and run_id picks them out.
# Without FINAL, which merged every granule read (3 times the cost): each version of an
# attempt row comes back, in version order, and the adapter keeps the last, as the merge
# would (equal versions hold equal rows: the projector rewrites a run only from its newest
# state).
RUN_ATTEMPTS = ("SELECT " + ", ".join(ATTEMPT_COLUMNS) + " FROM {db}.runs"
                " WHERE tenant IN %(tenants)s AND job_id IN %(job_ids)s"
                " AND scheduled_at IN %(times)s AND run_id IN %(run_ids)s"
                " ORDER BY run_id, attempt, version")
# The size of each attempt of the runs at these keys, for ListRuns' byte bound: the largest
# of an attempt's versions (the newest is among them, so the sum bounds what RUN_ATTEMPTS
# returns); lengths only, read where the page's runs are, never their text.
RUN_SIZES = ("SELECT run_id, attempt, max(length(output) + length(error)) FROM {db}.runs"
             " WHERE tenant IN %(tenants)s AND job_id IN %(job_ids)s"
             " AND scheduled_at IN %(times)s AND run_id IN %(run_ids)s"
             " GROUP BY run_id, attempt")
# What an attempt row holds besides its output and error (ids, times, worker, labels).
ATTEMPT_ROW_BYTES = 512
RUN_LOCATIONS = ("SELECT DISTINCT tenant, job_id, toUInt32(scheduled_at), run_id "
                 "FROM {db}.run_keys WHERE run_id IN %(run_ids)s")
INSERT_RUN_KEYS = "INSERT INTO {db}.run_keys (scheduled_at, run_id, tenant, job_id) VALUES"
# A database whose runs predate run_keys: every run it holds, once, when the table is made.
# Every run has a row of attempt 0 or 1; not DISTINCT, which would hold every run id of the
# history in memory: the copies of a key collapse in merges, and lookups ask DISTINCT.
FILL_RUN_KEYS = ("INSERT INTO {db}.run_keys (scheduled_at, run_id, tenant, job_id) "
                 "SELECT scheduled_at, run_id, tenant, job_id FROM {db}.runs "
                 "WHERE attempt <= 1")
TABLES = "SELECT name FROM system.tables WHERE database = %(db)s"

MISSED_COLUMNS = [f.name for f in fields(MissedFireTimesRow)]
INSERT_MISSED = ("INSERT INTO {db}.missed_fire_times (recorded_at, first, last, "
                 + ", ".join(MISSED_COLUMNS) + ") VALUES")
# A job's missed ranges, oldest first (audit, tests).
JOB_MISSED_RANGES = ("SELECT " + ", ".join(MISSED_COLUMNS) + " FROM {db}.missed_fire_times "
                     "FINAL WHERE tenant = %(tenant)s AND job_id = %(job_id)s ORDER BY first_us")

DEPENDENCY_COLUMNS = [f.name for f in fields(DependencyEventRow)]
INSERT_DEPENDENCY_EVENTS = ("INSERT INTO {db}.dependency_events (at, logical_time, "
                            + ", ".join(DEPENDENCY_COLUMNS) + ") VALUES")
# A job's dependency events, oldest first (audit, tests).
JOB_DEPENDENCY_EVENTS = ("SELECT " + ", ".join(DEPENDENCY_COLUMNS) + " FROM "
                         "{db}.dependency_events FINAL WHERE tenant = %(tenant)s "
                         "AND job_id = %(job_id)s ORDER BY version")

JOB_EVENT_COLUMNS = [f.name for f in fields(JobEventRow)]
INSERT_JOB_EVENTS = ("INSERT INTO {db}.job_events (at, " + ", ".join(JOB_EVENT_COLUMNS)
                     + ") VALUES")
# A job's timeline rows, oldest first (tests; the console reads its own query).
JOB_TIMELINE = ("SELECT " + ", ".join(JOB_EVENT_COLUMNS) + " FROM {db}.job_events FINAL "
                "WHERE tenant = %(tenant)s AND job_id = %(job_id)s ORDER BY version, event_type")

# The columns each table has now, to add those schema_columns.sql names and it lacks.
TABLE_COLUMNS = "SELECT table, name FROM system.columns WHERE database = %(db)s"

JOB_COLUMNS = [f.name for f in fields(JobHistoryRow)]
INSERT_JOBS = "INSERT INTO {db}.jobs (created_at, " + ", ".join(JOB_COLUMNS) + ") VALUES"
SELECT_JOBS = ("SELECT " + ", ".join(JOB_COLUMNS) + " FROM {db}.jobs FINAL "
               "WHERE job_id IN %(job_ids)s")

# Newest first, keyset-paginated on (scheduled_at_us, run_id) so pages stay stable while
# new runs arrive. Filters apply to the run's latest state (every attempt row carries it):
# FINAL ({final}) only for a status filter, the one that differs between a run's versions
# (the others are its key; without FINAL a job's page costs a quarter).
LIST_RUN_KEYS = """
SELECT scheduled_at_us, run_id, tenant, job_id, toUInt32(scheduled_at)
FROM {db}.runs {final}
WHERE 1 = 1 {filters}
GROUP BY scheduled_at_us, run_id, tenant, job_id, scheduled_at
ORDER BY scheduled_at_us DESC, run_id DESC
LIMIT %(limit)s
"""
