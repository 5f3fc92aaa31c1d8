"""The console's last-run query against the real ClickHouse (18.16): without FINAL it still
gives each job's newest run in its newest state, for jobs whose last run is within the last
day and for those whose last run is older; jobs without runs and other tenants' runs are
not in it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.config import Settings
from cronlog.infra.console.history import ClickHouseConsoleHistory
from cronlog.projections.history import HistoryProjector
from tests.support.run_events import scheduled

pytestmark = pytest.mark.integration


def test_last_runs_are_each_jobs_newest_run_in_its_newest_state(isolated: Settings) -> None:
    # Read when the test runs, not when the module is collected: the query compares with
    # the clock, and a whole session may pass between the two.
    NOW = datetime.now(UTC).replace(microsecond=0)
    store = ClickHouseRunHistory(isolated.clickhouse_host, isolated.clickhouse_port,
                                 isolated.clickhouse_database, isolated.clickhouse_user,
                                 isolated.clickhouse_password)
    store.ensure_schema()
    projector = HistoryProjector(store)
    recent, old, idle, foreign = (str(uuid4()) for _ in range(4))
    # recent: an older succeeded run, then one an hour ago that is only dispatched so far
    # (its rows then rewritten with the newer version: succeeded).
    projector.apply_batch(scheduled(str(uuid4()), recent, NOW - timedelta(days=3)))
    latest = str(uuid4())
    events = scheduled(latest, recent, NOW - timedelta(hours=1))
    projector.apply_batch(events[:2])
    projector.apply_batch(events[2:])
    # old: its last run 10 days ago, outside the first (one day) window.
    projector.apply_batch(scheduled(str(uuid4()), old, NOW - timedelta(days=12)))
    projector.apply_batch(scheduled(str(uuid4()), old, NOW - timedelta(days=10)))
    # foreign: another tenant's job, asked for by id under this tenant.
    projector.apply_batch(scheduled(str(uuid4()), foreign, NOW, tenant="other"))
    # A future fire time (pre-enqueued) is not the last run yet.
    projector.apply_batch(scheduled(str(uuid4()), old, NOW + timedelta(minutes=5))[:1])

    last = ClickHouseConsoleHistory(isolated).last_runs("t", [recent, old, idle, foreign])
    assert set(last) == {recent, old}
    assert last[recent].status == "succeeded"
    assert last[recent].scheduled_at == NOW - timedelta(hours=1)
    assert last[recent].start_lag_seconds == pytest.approx(0.025)
    assert last[old].scheduled_at == NOW - timedelta(days=10)
    assert last[old].status == "succeeded"
