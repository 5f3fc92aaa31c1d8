"""A paused every-second job resumed after more than the catch-up window: the fire times it
missed are one range in history (ClickHouse and the audit timeline), and with the job's runs
they cover every second exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.config import Settings
from cronlog.projections.job_history import MissedFireTimesRow
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.processes import settings_env
from tests.e2e.conftest import RunningService, rid
from tests.e2e.service_groups import QUICK_MISFIRES
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
# A short catch-up window, so that a pause of a few seconds already misses fire times.
SERVICE = QUICK_MISFIRES
# Missed beyond the runs the lookahead had created before the pause (which the pause
# cancels: their fire times are not run again, nor missed).
MISSED_FOR = timedelta(seconds=8)


def all_runs(stub: pb_grpc.JobServiceStub, job_id: str) -> list[pb.Run]:
    runs: list[pb.Run] = []
    token = ""
    while True:
        page = stub.ListRuns(pb.ListRunsRequest(job_id=job_id, page_size=200,
                                                page_token=token), timeout=10)
        runs += page.runs
        token = page.next_page_token
        if not token:
            return runs


def test_resume_after_the_catch_up_window_records_one_missed_range(
        service: RunningService) -> None:
    settings = service.settings
    assert isinstance(settings, Settings)
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "missed-" + uuid.uuid4().hex[:6]
    spec = pb.JobSpec(name="every-second", tenant=tenant, handler="echo", cron="* * * * * *",
                      misfire_policy=pb.MISFIRE_POLICY_SKIP)
    job = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job
    wait_for(lambda: len(all_runs(stub, job.job_id)) >= 2, 30, "the job firing")

    stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=job.job_id), timeout=30)
    resume_at = datetime.now(UTC) + settings.lookahead + MISSED_FOR
    # The scenario is a pause: what passes is time itself.
    wait_for(lambda: datetime.now(UTC) >= resume_at, 30, "the pause to last")
    stub.ResumeJob(pb.ResumeJobRequest(request_id=rid(), job_id=job.job_id), timeout=30)

    history = ClickHouseRunHistory(settings.clickhouse_host, settings.clickhouse_port,
                                   settings.clickhouse_database, settings.clickhouse_user,
                                   settings.clickhouse_password)

    def one_range() -> MissedFireTimesRow | None:
        rows = history.missed_fire_times(tenant, job.job_id)
        return rows[0] if len(rows) == 1 else None

    missed = wait_for(one_range, 30, "the missed range in history")
    assert missed.reason.startswith("misfired")
    first = datetime.fromtimestamp(missed.first_us / 1e6, UTC)
    last = datetime.fromtimestamp(missed.last_us / 1e6, UTC)
    assert missed.count == int((last - first).total_seconds()) + 1, "every second counted"
    # Most of the pause past the lookahead is too late to run (the catch-up window is 2 s).
    assert missed.count >= (MISSED_FOR - timedelta(seconds=4)).total_seconds()

    wait_for(lambda: any(r.scheduled_at.ToDatetime(UTC) > last + timedelta(seconds=3)
                         for r in all_runs(stub, job.job_id)), 30, "firing again")
    stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=job.job_id), timeout=30)

    def settled() -> list[pb.Run] | None:
        runs = all_runs(stub, job.job_id)
        done = {pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_CANCELLED}
        return runs if runs and all(r.status in done for r in runs) else None

    runs = wait_for(settled, 60, "every run ended and in history")
    seconds = sorted(int(r.scheduled_at.ToDatetime(UTC).timestamp()) for r in runs)
    in_range = [s for s in seconds if first.timestamp() <= s <= last.timestamp()]
    assert in_range == [], "a missed fire time never also runs"
    covered = sorted(seconds + list(range(int(first.timestamp()), int(last.timestamp()) + 1)))
    assert covered == list(range(covered[0], covered[-1] + 1)), \
        "runs and the range cover every second, none twice (invariant 5)"

    done = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", "audit",
                           "job", job.job_id], env={**os.environ, **settings_env(settings)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if "JobFireTimesMissed" in line]
    assert len(lines) == 1, done.stdout
    assert f"count={missed.count}" in lines[0] and f"first={first.isoformat()}" in lines[0]
