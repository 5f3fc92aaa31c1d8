"""`cronlog replay` rebuilds both projections from the log and they match the live ones."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from cronlog.infra.config import Settings
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.processes import settings_env
from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

# `cronlog replay` rebuilds and compares everything the service holds; the test counts it.
OWN_SERVICE = "replay's counts are of every job and run the service holds"


def test_rebuilt_projections_match_the_live_ones(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "replay-" + uuid.uuid4().hex[:6]
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    cron = pb.JobSpec(name="bounded", tenant=tenant, handler="echo", cron="* * * * * *")
    cron.start_at.FromDatetime(start)
    cron.end_at.FromDatetime(start + timedelta(seconds=3))
    flaky = pb.JobSpec(name="flaky", tenant=tenant, handler="fail", payload=b'{"times": 1}')
    flaky.at.FromDatetime(start)
    flaky.retry_policy.initial_backoff.FromMilliseconds(100)
    created = [stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                              timeout=30).job for spec in (cron, flaky)]
    # A dependent job: its link, its settled logical time and its run are rebuilt too.
    after = pb.JobSpec(name="after-flaky", tenant=tenant, handler="echo",
                       after=pb.Dependency(job_ids=[created[1].job_id]))
    stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=after), timeout=30)

    def all_done() -> bool:
        runs = stub.ListRuns(pb.ListRunsRequest(tenant=tenant), timeout=10).runs
        return len(runs) == 6 and all(r.status == pb.RUN_STATUS_SUCCEEDED for r in runs)

    wait_for(all_done, 60, "six runs succeeded and in history")
    settings = service.settings
    assert isinstance(settings, Settings)
    done = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", "replay"],
                          env={**os.environ, **settings_env(settings)}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("postgres jobs: 3 rebuilt, 3 live, 0 mismatches")
               for line in lines), done.stdout
    assert any(line.startswith("postgres runs: 6 rebuilt, 6 live, 0 mismatches")
               for line in lines), done.stdout
    assert any(line.startswith("postgres dependency_settled: 1 rebuilt, 1 live, 0 mismatches")
               for line in lines), done.stdout
    assert any(line.startswith("clickhouse runs: 7 rebuilt, 7 live, 0 mismatches")
               for line in lines), done.stdout
    # They match: the rebuilt copies are gone, nothing is left by repeated audits.
    (copies,) = [line for line in lines if line.startswith("rebuilt into Postgres schema")]
    schema = copies.split()[4]
    assert copies.endswith("dropped: they match (--keep keeps them)"), copies
    with psycopg.connect(settings.postgres_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM information_schema.schemata "
                            "WHERE schema_name = %s", (schema,)).fetchone() == (0,)


def test_in_flight_runs_in_postgres_and_history_agree(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "inflight-" + uuid.uuid4().hex[:6]
    spec = pb.JobSpec(name="slow", tenant=tenant, handler="sleep", payload=b'{"seconds": 8}')
    spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                         timeout=30).job
    settings = service.settings
    assert isinstance(settings, Settings)

    def in_flight() -> dict[str, str]:
        with psycopg.connect(settings.postgres_dsn) as conn:
            rows = conn.execute("SELECT run_id::text, status FROM runs WHERE job_id = %s "
                                "AND status IN ('scheduled', 'running')",
                                (job.job_id,)).fetchall()
        return {run_id: status for run_id, status in rows}

    wait_for(lambda: "running" in in_flight().values(), 30, "a run in flight")
    names = {pb.RUN_STATUS_SCHEDULED: "scheduled", pb.RUN_STATUS_RUNNING: "running"}

    def agree() -> bool:
        state = in_flight()
        history = {r.run_id: names.get(r.status, "done") for r in stub.ListRuns(
            pb.ListRunsRequest(job_id=job.job_id, page_size=100), timeout=10).runs}
        return bool(state) and all(history.get(run_id) == status
                                   for run_id, status in state.items())

    # The projector follows the log closely: while the run is still going, history shows
    # it with the same status as Postgres.
    wait_for(agree, 6, "the in-flight run agreeing between Postgres and history",
             interval=0.3)
