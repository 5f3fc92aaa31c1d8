"""The console's RunHistory on ClickHouse: the docs/analytics.md queries, each filtered to one
tenant and a time window, read-only. Valid on ClickHouse 18.16 and current engines.

Times go in and come out as epoch seconds (toDateTime / toUInt32), so neither the server's
nor the console's time zone changes a chart.

Reads go through a pool of connections (CRONLOG_CONSOLE_HISTORY_CONNECTIONS) of which one
tenant holds at most its share (CRONLOG_CONSOLE_TENANT_SHARE of them) at once, and each read
gets only what is left of its page's time limit (CRONLOG_CONSOLE_PAGE_SECONDS): waiting for a
connection, then as ClickHouse's max_execution_time. A tenant's heavy pages queue behind its
own share; another tenant's page finds a connection, and a page past its limit is shown
without its charts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_driver import Client
from clickhouse_driver.errors import Error as ClickHouseError

from cronlog.console.budget import time_left
from cronlog.console.fair_share import FairPool, PoolBusy, share_of
from cronlog.console.ports import (
    FailingJob,
    HistoryUnavailable,
    JobEventLine,
    LastRun,
    MinuteOfHourLoad,
    MinutePoint,
)
from cronlog.infra.config import Settings

RUNS_PER_MINUTE = """
SELECT toUInt32(toStartOfMinute(scheduled_at)) AS minute, run_status, uniqExact(run_id) AS runs
FROM {db}.runs FINAL
WHERE tenant = %(tenant)s AND scheduled_at >= toDateTime(%(since)s) AND attempt <= 1
GROUP BY minute, run_status
ORDER BY minute
"""

START_LAG_PER_MINUTE = """
SELECT toUInt32(toStartOfMinute(scheduled_at)) AS minute,
       quantile(0.5)(start_lag_us) / 1000000 AS p50,
       quantile(0.99)(start_lag_us) / 1000000 AS p99
FROM {db}.runs FINAL
WHERE tenant = %(tenant)s AND scheduled_at >= toDateTime(%(since)s) AND started_at_us > 0
  {job_filter}
GROUP BY minute
ORDER BY minute
"""

DURATION_PER_MINUTE = """
SELECT toUInt32(toStartOfMinute(scheduled_at)) AS minute,
       quantile(0.5)((finished_at_us - started_at_us) / 1000000) AS p50,
       max(finished_at_us - started_at_us) / 1000000 AS longest
FROM {db}.runs FINAL
WHERE tenant = %(tenant)s AND job_id = %(job_id)s AND scheduled_at >= toDateTime(%(since)s)
  AND started_at_us > 0 AND finished_at_us > 0
GROUP BY minute
ORDER BY minute
"""

# The latest fire time not in the future of each job, its run status and first start lag.
# Without FINAL: every version of a run is a row, and the newest version of the newest run
# is the row with the greatest (scheduled_at_us, version), so argMax over both is exact.
# FINAL merged every granule holding any of the page's jobs, which are spread over the
# whole key: the whole table (358 ms on a million runs; 43 ms without it). Asked first
# over the last day ({since}), which most jobs' last runs fall in (10 ms), then over all
# the history for the jobs not found there.
LAST_RUNS = """
SELECT job_id,
       argMax(run_status, (scheduled_at_us, version)) AS status,
       max(scheduled_at_us) AS at_us,
       argMax(start_lag_us, (scheduled_at_us, version)) AS lag_us
FROM {db}.runs
WHERE tenant = %(tenant)s AND job_id IN %(job_ids)s AND attempt <= 1
  AND scheduled_at <= toDateTime(%(now)s) AND scheduled_at >= toDateTime(%(since)s)
GROUP BY job_id
"""
RECENT = timedelta(days=1)

# Without FINAL (twice as fast on a million rows): every version of a run has its run_id, and
# dead_lettered is a terminal status, so counting distinct run ids is exact either way.
TOP_FAILING = """
SELECT job_id,
       uniqExact(run_id) AS runs,
       uniqExactIf(run_id, run_status IN ('failed', 'dead_lettered')) AS failed_runs
FROM {db}.runs
WHERE tenant = %(tenant)s AND attempt > 0 AND scheduled_at >= toDateTime(%(since)s)
GROUP BY job_id
HAVING failed_runs > 0
ORDER BY failed_runs DESC, runs DESC
LIMIT %(limit)s
"""

DEAD_LETTERS = """
SELECT uniqExact(run_id)
FROM {db}.runs
WHERE tenant = %(tenant)s AND run_status IN ('failed', 'dead_lettered')
  AND scheduled_at >= toDateTime(%(since)s)
"""

# docs/analytics.md's top-of-hour load for one tenant, every minute of the hour, over the
# window: runs by the minute of the hour they were due at, and per hour on average (over the
# hours in which that minute had runs). The minute and hour come from the epoch, so they are
# the UTC hour's whatever the server's zone (toMinute would follow it: a +05:30 server moves
# 00:00 UTC to minute 30). Without FINAL: every version of a run keeps its run_id and
# scheduled_at, so the distinct counts are exact.
TOP_OF_HOUR = """
SELECT intDiv(modulo(toUInt32(scheduled_at), 3600), 60) AS minute_of_hour,
       uniqExact(run_id) AS runs,
       round(runs / uniqExact(intDiv(toUInt32(scheduled_at), 3600)), 1) AS runs_per_hour_on_average
FROM {db}.runs
WHERE tenant = %(tenant)s AND attempt <= 1 AND scheduled_at >= toDateTime(%(since)s)
GROUP BY minute_of_hour
ORDER BY minute_of_hour
"""

# The job's audit timeline (schema.sql, job_events), newest first. DISTINCT instead of FINAL:
# a redelivered event is the same row until a merge collapses it, and DISTINCT drops the copy
# after reading only the job's rows, where FINAL would merge them first.
JOB_TIMELINE = """
SELECT DISTINCT at_us, version, event_type, request_id, actor, summary
FROM {db}.job_events
WHERE tenant = %(tenant)s AND job_id = %(job_id)s
ORDER BY version DESC, event_type DESC
LIMIT %(limit)s
"""

TENANTS = "SELECT DISTINCT tenant FROM {db}.jobs ORDER BY tenant LIMIT %(limit)s"


def _epoch(at: datetime) -> int:
    return int(at.timestamp())


def _minute(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class ClickHouseConsoleHistory:
    def __init__(self, settings: Settings) -> None:
        tls: dict[str, Any] = {}
        if settings.clickhouse_secure:
            tls = {"secure": True, "verify": settings.clickhouse_verify,
                   "ca_certs": settings.clickhouse_ca_file or None}
        self._db = settings.clickhouse_database
        self._page_seconds = settings.console_page_seconds

        def connect() -> Client:
            # readonly=2: this client can only read (and set per-query settings). The
            # socket's own limit backs the server's max_execution_time.
            return Client(host=settings.clickhouse_host, port=settings.clickhouse_port,
                          user=settings.clickhouse_user, password=settings.clickhouse_password,
                          connect_timeout=min(5.0, settings.console_page_seconds),
                          send_receive_timeout=settings.console_page_seconds + 2,
                          settings={"readonly": 2}, **tls)

        capacity = settings.console_history_connections
        self._pool = FairPool(connect, capacity,
                              share_of(capacity, settings.console_tenant_share))

    def _rows(self, template: str, params: Mapping[str, Any], **parts: str) -> list[Any]:
        query = template.replace("{db}", self._db)
        for key, value in parts.items():
            query = query.replace("{" + key + "}", value)
        # The tenant list of the sign-in page is nobody's: tenant "".
        tenant = str(params.get("tenant", ""))
        left = time_left(self._page_seconds)
        if left <= 0:
            raise HistoryUnavailable("ClickHouse: the page's time limit is spent")
        try:
            with self._pool.lease(tenant, left) as client:
                # Whole seconds (18.16 takes no fraction): at most a second past the limit.
                limit = max(1, math.ceil(time_left(self._page_seconds)))
                try:
                    return list(client.execute(query, dict(params),
                                               settings={"max_execution_time": limit}))
                except (ClickHouseError, OSError, EOFError) as exc:
                    client.disconnect()
                    raise HistoryUnavailable(f"ClickHouse: {exc}") from exc
        except PoolBusy as exc:
            raise HistoryUnavailable(f"ClickHouse: {exc}") from exc

    def runs_per_minute(self, tenant: str, since: datetime) -> Sequence[MinutePoint]:
        by_minute: dict[int, dict[str, float]] = {}
        for minute, status, runs in self._rows(RUNS_PER_MINUTE,
                                               {"tenant": tenant, "since": _epoch(since)}):
            by_minute.setdefault(minute, {})[status] = float(runs)
        return [MinutePoint(_minute(m), v) for m, v in sorted(by_minute.items())]

    def start_lag_per_minute(self, tenant: str, since: datetime,
                             job_id: str = "") -> Sequence[MinutePoint]:
        rows = self._rows(START_LAG_PER_MINUTE,
                          {"tenant": tenant, "since": _epoch(since), "job_id": job_id},
                          job_filter="AND job_id = %(job_id)s" if job_id else "")
        return [MinutePoint(_minute(m), {"p50": float(p50), "p99": float(p99)})
                for m, p50, p99 in rows]

    def duration_per_minute(self, tenant: str, since: datetime,
                            job_id: str) -> Sequence[MinutePoint]:
        rows = self._rows(DURATION_PER_MINUTE,
                          {"tenant": tenant, "since": _epoch(since), "job_id": job_id})
        return [MinutePoint(_minute(m), {"p50": float(p50), "max": float(longest)})
                for m, p50, longest in rows]

    def last_runs(self, tenant: str, job_ids: Sequence[str]) -> Mapping[str, LastRun]:
        if not job_ids:
            return {}
        now = datetime.now(UTC)
        found: dict[str, LastRun] = {}
        wanted = tuple(job_ids)
        for since in (_epoch(now - RECENT), 0):
            rows = self._rows(LAST_RUNS, {"tenant": tenant, "job_ids": wanted,
                                          "now": _epoch(now), "since": since})
            found.update({job_id: LastRun(status, datetime.fromtimestamp(at_us / 1e6, UTC),
                                          lag_us / 1e6 if lag_us > 0 else None)
                          for job_id, status, at_us, lag_us in rows})
            wanted = tuple(j for j in wanted if j not in found)
            if not wanted:
                break
        return found

    def top_failing(self, tenant: str, since: datetime, limit: int) -> Sequence[FailingJob]:
        rows = self._rows(TOP_FAILING, {"tenant": tenant, "since": _epoch(since),
                                        "limit": limit})
        return [FailingJob(job_id, int(runs), int(failed)) for job_id, runs, failed in rows]

    def dead_letters(self, tenant: str, since: datetime) -> int:
        rows = self._rows(DEAD_LETTERS, {"tenant": tenant, "since": _epoch(since)})
        return int(rows[0][0]) if rows else 0

    def job_timeline(self, tenant: str, job_id: str, limit: int) -> Sequence[JobEventLine]:
        rows = self._rows(JOB_TIMELINE, {"tenant": tenant, "job_id": job_id, "limit": limit})
        return [JobEventLine(datetime.fromtimestamp(at_us / 1e6, UTC), int(version), event,
                             request_id, actor, summary)
                for at_us, version, event, request_id, actor, summary in rows]

    def top_of_hour(self, tenant: str, since: datetime) -> Sequence[MinuteOfHourLoad]:
        rows = self._rows(TOP_OF_HOUR, {"tenant": tenant, "since": _epoch(since)})
        return [MinuteOfHourLoad(int(minute), int(runs), float(average))
                for minute, runs, average in rows]

    def tenants(self, limit: int) -> Sequence[str]:
        return [t for (t,) in self._rows(TENANTS, {"limit": limit})]
