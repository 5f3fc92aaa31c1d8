"""Postgres lost (issue 15, items 5 and 6): on the session's 3-broker Kafka cluster (topics
at replication factor 3), while jobs fire every second, Postgres goes away for 30 s and comes
back as an empty database; the schedulers rebuild every partition's state
from the Kafka log and fire on. The committed log is then audited as in test_failover: no
fire time scheduled twice, none missing, one terminal state per attempt, every run executed.

With the servers this session started (`make test`), the Postgres server itself is stopped
for 30 s, then its database is dropped and created empty. Beside a shared stack, whose
server the test must not stop, the test's own database is dropped at once (its connections
cut, WITH (FORCE)) and created empty 30 s later: to the schedulers both are a Postgres
outage that ends with an empty database.

The jobs are RUN_ALL (test_failover's every-second job): every fire time due while Postgres
was gone must run, late. With the default RUN_LATEST the same outage loses nothing either:
fire times less than the catch-up window (60 s) late run late, older ones are recorded as
missed (DESIGN, invariant 5).
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from cronlog.infra.config import Settings
from cronlog.infra.provision import provision
from cronlog_dev.stack.kafka_cluster import KafkaCluster
from cronlog_dev.stack.local_stack import LocalStack
from tests.chaos.cluster import Cluster, EventTopics
from tests.chaos.log_audit import audit, describe, verified
from tests.chaos.service import (
    answering_stub,
    chaos_settings,
    create_jobs,
    every_second_spec,
    restart_dead_nodes,
    wait_window_finished,
)
from tests.chaos.start_lag import Window, lag_table, run_starts, window_lags
from tests.conftest import ROOT

pytestmark = pytest.mark.chaos

SECONDS = int(os.environ.get("CRONLOG_CHAOS_PG_SECONDS", "75"))
JOBS = int(os.environ.get("CRONLOG_CHAOS_PG_JOBS", "60"))
DOWN = 30  # seconds Postgres is gone
LOSS_AT = 10  # seconds into the firing window


def _server_dsn(settings: Settings) -> tuple[str, str]:
    server, database = settings.postgres_dsn.rsplit("/", 1)
    return server + "/postgres", database.split("?", 1)[0]


def _drop(settings: Settings) -> None:
    admin, database = _server_dsn(settings)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{database}" WITH (FORCE)')


def _create_empty(settings: Settings) -> None:
    admin, database = _server_dsn(settings)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')


def _lose_postgres(settings: Settings, stack: LocalStack | None) -> tuple[datetime, datetime]:
    """Postgres away for DOWN seconds, back empty and provisioned (docs/recovery.md);
    returns when it went and when the empty database was provisioned."""
    went = datetime.now(UTC)
    if stack is not None:
        stack.postgres.stop()
        time.sleep(DOWN)
        stack.postgres.start()
        _drop(settings)
    else:
        _drop(settings)
        time.sleep(DOWN)
    _create_empty(settings)
    provision(settings)  # the operator's step: the schema, every partition at offset 0
    return went, datetime.now(UTC)


def test_schedulers_rebuild_an_empty_postgres_from_the_log_and_fire_on(
        local_stack: LocalStack | None, stack_settings: Settings,
        kafka_cluster: KafkaCluster) -> None:
    restart_dead_nodes(kafka_cluster)
    settings = chaos_settings(stack_settings, kafka_bootstrap=kafka_cluster.bootstrap,
                              topic_replication_factor=3, topic_min_insync_replicas=2)
    run_dir = ROOT / ".cronlog" / "chaos" / ("pg-loss-" + uuid.uuid4().hex[:6])
    (run_dir / "records").mkdir(parents=True)
    cluster = Cluster(settings, run_dir / "logs", run_dir / "records")
    try:
        cluster.start_all("api", "scheduler-1", "worker-1", "scheduler-2", "worker-2")
        stub = answering_stub(cluster)
        start = (datetime.now(UTC) + timedelta(seconds=15 + JOBS // 10)).replace(microsecond=0)
        end = start + timedelta(seconds=SECONDS)
        job_ids = create_jobs(
            stub, JOBS,
            lambda i: every_second_spec(f"pg-loss-{i}", start, end, 0.2 + (i % 3) * 0.2), start,
            timeout=60)
        expected = {j: [start + timedelta(seconds=s) for s in range(SECONDS + 1)]
                    for j in job_ids}
        while datetime.now(UTC) < start + timedelta(seconds=LOSS_AT):
            time.sleep(0.1)
        went, provisioned = _lose_postgres(settings, local_stack)
        follower = EventTopics(settings)
        wait_window_finished(follower, expected, cluster, end, SECONDS + 120, "postgres loss")
    finally:
        cluster.stop()
    events = follower.follow()
    result = audit(events, expected, cluster.executions())
    rebuilt = [line for n in ("scheduler-1", "scheduler-2")
               for line in cluster.log_text(n).splitlines() if "took partitions" in line]
    windows = [Window("baseline", "before the loss", start, went),
               Window("outage", f"Postgres gone ({DOWN} s) and rebuilt", went, provisioned),
               Window("after", "after the rebuild", provisioned, end + timedelta(seconds=1))]
    how = "server stopped" if local_stack is not None else "database dropped (shared stack)"
    print(f"\npostgres loss: {JOBS} jobs x {SECONDS + 1} fire times; Postgres lost "
          f"({how}) at {went:%H:%M:%S} for {DOWN} s, empty database provisioned "
          f"{(provisioned - went).total_seconds():.1f} s after")
    print(result.summary())
    print(f"takeovers logged by the schedulers: {len(rebuilt)}; last: "
          f"{rebuilt[-1].split(' took ', 1)[-1] if rebuilt else '-'}")
    print(lag_table(window_lags(run_starts(events), windows)))
    assert result.runs_scheduled == JOBS * (SECONDS + 1)
    assert result.missed_runs == 0, "RUN_ALL: every fire time runs, late"
    assert not any(result.violations.values()), result.summary()
    # cronlog verify's proof over the same log, from each job's own events.
    proof = verified(events, start, end + timedelta(seconds=1))
    print(describe(proof))
    assert proof.holds, describe(proof)
    assert proof.tally.fire_times + proof.tally.missed_fire_times == result.runs_scheduled
    assert not result.runs_not_finished, result.summary()
    after = window_lags(run_starts(events), windows[2:])[0]
    assert after.not_started == 0
