"""Run starts as cronlog's history projection (ClickHouse `runs`) records them.

started_at is the worker's clock when it started the attempt (in its AttemptStarted
report); not_before is the instant the run was due (its fire time here: no spread). The
projection is a consumer of the log, so it trails the workers; the bench waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from clickhouse_driver import Client

from cronlog.infra.config import Settings
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.stats import Start


def _client(settings: Settings) -> Client:
    return Client(settings.clickhouse_host, port=settings.clickhouse_port,
                  user=settings.clickhouse_user, password=settings.clickhouse_password,
                  connect_timeout=10, send_receive_timeout=120)


def started_count(settings: Settings, tenant: str | None = None) -> int:
    """First attempts started so far; a run's attempt row is rewritten as the run changes,
    so rows are counted by run until ClickHouse merges them."""
    client = _client(settings)
    try:
        rows = client.execute(f"SELECT uniqExact(run_id) FROM {settings.clickhouse_database}.runs "
                              "WHERE attempt = 1 AND started_at_us > 0"
                              + ("" if tenant is None else " AND tenant = %(tenant)s"),
                              {"tenant": tenant})
    finally:
        client.disconnect()
    return int(rows[0][0]) if rows else 0


def first_attempt_starts(settings: Settings, tenant: str | None = None) -> list[Start]:
    """Of every tenant's runs, or of one tenant's (the scale workload's burst jobs)."""
    client = _client(settings)
    try:
        rows = client.execute(
            f"SELECT run_id, min(not_before_us), max(started_at_us), max(dispatched_at_us) "
            f"FROM {settings.clickhouse_database}.runs "
            "WHERE attempt = 1 AND started_at_us > 0"
            + ("" if tenant is None else " AND tenant = %(tenant)s") + " GROUP BY run_id",
            {"tenant": tenant})
    finally:
        client.disconnect()
    return [Start(int(due), int(started), int(dispatched))
            for _run, due, started, dispatched in rows]


def scheduled_count(settings: Settings, from_us: int, until_us: int) -> int:
    """Runs scheduled for fire times in [from_us, until_us), whatever became of them."""
    client = _client(settings)
    try:
        rows = client.execute(
            f"SELECT uniqExact(run_id) FROM {settings.clickhouse_database}.runs "
            "WHERE scheduled_at_us >= %(lo)s AND scheduled_at_us < %(hi)s",
            {"lo": from_us, "hi": until_us})
    finally:
        client.disconnect()
    return int(rows[0][0]) if rows else 0


def wait_started(settings: Settings, expected: int, deadline: float, what: str,
                 check: Callable[[], None], tenant: str | None = None) -> int:
    """Waits until `expected` first attempts started (of one tenant's runs, or everyone's)
    or time.time() reaches `deadline`, saying how far it got every ~10 s; `check` raises
    when a process of the workload exited. The count last seen."""
    last_report, started = 0.0, 0
    while time.time() < deadline:
        check()
        started = started_count(settings, tenant)
        if started >= expected:
            break
        if time.time() - last_report >= 10:
            say(f"[cronlog] {what}: {started:,} of {expected:,} started (as projected)")
            last_report = time.time()
        time.sleep(1.0)
    return started


def wait_settled(settings: Settings, limit: float, quiet: float = 5.0,
                 tenant: str | None = None) -> int:
    """Waits until the started count stops growing for `quiet` seconds (the projector has
    caught up with what the workers reported), at most `limit` seconds."""
    deadline = time.monotonic() + limit
    last, since = started_count(settings, tenant), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = started_count(settings, tenant)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last
