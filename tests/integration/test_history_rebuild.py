"""`cronlog replay --rebuild` against the real broker and ClickHouse: a history that lost
rows and gained wrong ones is replaced by the one the log says, and the old tables are
kept aside; with a gap in the log inside the horizon it refuses and changes nothing."""

from __future__ import annotations

from datetime import datetime

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from cronlog.infra.clickhouse.history_sql import SELECT_ATTEMPTS
from cronlog.infra.clickhouse.history_swap import SWAPPED_TABLES
from cronlog.infra.composition import build_run_history
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config
from cronlog.infra.kafka.topics import ensure_core_topics
from tests.support.cli import cronlog, set_settings_env
from tests.support.event_log import project_live, write_job

pytestmark = pytest.mark.integration
RUN_ROWS = SELECT_ATTEMPTS + " ORDER BY run_id, attempt"


@pytest.fixture
def cli_env(isolated: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    return set_settings_env(isolated, monkeypatch)


def test_rebuild_replaces_a_damaged_history_with_the_log_s(
        cli_env: Settings, capfd: pytest.CaptureFixture[str]) -> None:
    settings = cli_env
    ensure_core_topics(settings)
    written = [write_job(settings, runs=3), write_job(settings, runs=2)]
    for job in written:
        project_live(settings, job)
    live = build_run_history(settings)
    db = settings.clickhouse_database
    good_runs = live.execute(RUN_ROWS.format(db=db))
    good_jobs = live.execute(f"SELECT job_id, version FROM {db}.jobs FINAL ORDER BY job_id")
    assert len(good_runs) == 5 and len(good_jobs) == 2

    # Damage: one run's rows gone, another's overwritten by a newer wrong version, a run the
    # log never had, and the jobs table lost.
    first, second = good_runs[0][3], good_runs[1][3]
    live.execute(f"ALTER TABLE {db}.runs DELETE WHERE run_id = %(r)s", {"r": first})
    live.execute(f"INSERT INTO {db}.runs (scheduled_at, scheduled_at_us, tenant, job_id, run_id, "
                 "attempt, run_status, version) SELECT scheduled_at, scheduled_at_us, tenant, "
                 f"job_id, run_id, attempt, 'failed', 999 FROM {db}.runs WHERE run_id = %(r)s",
                 {"r": second})
    live.execute(f"INSERT INTO {db}.runs (scheduled_at, run_id, tenant, version) VALUES",
                 [{"scheduled_at": datetime(2026, 1, 1),
                   "run_id": "not-in-the-log", "tenant": "acme", "version": 1}])
    live.execute(f"DROP TABLE {db}.jobs")
    assert live.execute(RUN_ROWS.format(db=db)) != good_runs

    code, out, err = cronlog(capfd, "replay", "--rebuild")
    assert code == 0, out + err
    assert "history rebuilt from the log: 5 runs, 2 jobs" in out, out
    assert live.execute(RUN_ROWS.format(db=db)) == good_runs
    assert live.execute(f"SELECT job_id, version FROM {db}.jobs FINAL ORDER BY job_id") == \
        good_jobs
    # The damaged tables are kept, for the operator to look at and drop.
    replaced = next(line.split("database ")[1].split(":")[0] for line in out.splitlines()
                    if "kept in database" in line)
    kept = {row[0] for row in live.execute(
        "SELECT name FROM system.tables WHERE database = %(d)s", {"d": replaced})}
    assert kept == set(SWAPPED_TABLES)
    assert ("not-in-the-log",) in live.execute(f"SELECT run_id FROM {replaced}.runs")
    live.execute(f"DROP DATABASE {replaced}")
    # And the comparison agrees.
    code, out, err = cronlog(capfd, "replay")
    assert "clickhouse runs: 5 rebuilt, 5 live, 0 mismatches" in out, out + err


def test_rebuild_refuses_a_gap_inside_the_horizon_and_changes_nothing(
        cli_env: Settings, capfd: pytest.CaptureFixture[str]) -> None:
    settings = cli_env
    ensure_core_topics(settings)
    written = write_job(settings, runs=2)
    project_live(settings, written)
    live = build_run_history(settings)
    db = settings.clickhouse_database
    before = live.execute(RUN_ROWS.format(db=db))
    admin = AdminClient(admin_config(settings))
    for future in admin.delete_records(
            [TopicPartition(settings.run_events_topic, written.partition, 1)]).values():
        future.result(timeout=30)
    code, _, err = cronlog(capfd, "replay", "--rebuild")
    assert code == 1
    assert (f"{settings.run_events_topic} partition {written.partition}: offsets 0 to 0 are "
            "no longer in the log, within the history horizon") in err, err
    assert live.execute(RUN_ROWS.format(db=db)) == before
    databases = {row[0] for row in live.execute("SELECT name FROM system.databases")}
    assert not any(name.startswith(f"{db}_re") for name in databases), "nothing was built"
