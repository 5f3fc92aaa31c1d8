"""The `cronlog` CLI does everything the gRPC API does, against the real service."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e


def cli(service: RunningService, *args: str, ok: bool = True) -> Any:
    done = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli",
                           "--address", service.address, *args],
                          capture_output=True, text=True, timeout=90)
    if not ok:
        assert done.returncode != 0, done.stdout
        return done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_every_rpc_from_the_command_line(service: RunningService) -> None:
    tenant = "cli-" + uuid.uuid4().hex[:6]
    job = cli(service, "jobs", "create", "--name", "cli", "--tenant", tenant, "--handler", "echo",
              "--payload", "hi", "--cron", "0 0 1 1 *", "--time-zone", "Europe/Berlin",
              "--timeout-seconds", "30", "--heartbeat-timeout-seconds", "10",
              "--spread-seconds", "2", "--max-attempts", "4", "--initial-backoff-seconds", "0.5",
              "--max-backoff-seconds", "8", "--backoff-coefficient", "3", "--jitter", "0.5",
              "--non-retryable", "Fatal", "--misfire-policy", "skip",
              "--overlap-policy", "buffer_one", "--label", "team=data")["job"]
    spec = job["spec"]
    assert spec["time_zone"] == "Europe/Berlin" and spec["labels"] == {"team": "data"}
    assert spec["retry_policy"]["max_attempts"] == 4
    assert spec["retry_policy"]["non_retryable_errors"] == ["Fatal"]
    assert spec["overlap_policy"] == "OVERLAP_POLICY_BUFFER_ONE"
    assert spec["misfire_policy"] == "MISFIRE_POLICY_SKIP"
    job_id = job["job_id"]
    assert cli(service, "jobs", "get", job_id)["job"]["version"] == job["version"]
    listed = cli(service, "jobs", "list", "--tenant", tenant)["jobs"]
    assert [j["job_id"] for j in listed] == [job_id]

    updated = cli(service, "jobs", "update", job_id, "--expected-version", str(job["version"]),
                  "--payload", "v2", "--overlap-policy", "skip")["job"]
    assert updated["spec"]["payload"] == "djI="  # base64 of v2
    assert updated["spec"]["labels"] == {"team": "data"}, "options not given are kept"
    stale = cli(service, "jobs", "update", job_id, "--expected-version", "1", "--payload", "x",
                ok=False)
    assert "FAILED_PRECONDITION" in stale

    assert cli(service, "jobs", "pause", job_id)["job"]["status"] == "JOB_STATUS_PAUSED"
    assert cli(service, "jobs", "resume", job_id)["job"]["status"] == "JOB_STATUS_ACTIVE"
    run = cli(service, "jobs", "trigger", job_id)["run"]
    assert run["trigger"] == "manual"
    wait_for(lambda: _status(service, run["run_id"]) == "RUN_STATUS_SUCCEEDED", 30,
             "the manual run succeeding")

    now = datetime.now(UTC)
    # Slow runs, one at a time: the second backfilled run waits while the first runs.
    cli(service, "jobs", "update", job_id, "--handler", "sleep", "--payload",
        '{"seconds": 30}')
    backfill = cli(service, "jobs", "backfill", job_id, "--from",
                   (now - timedelta(days=800)).isoformat(), "--until",
                   (now - timedelta(days=1)).isoformat())
    assert len(backfill["run_ids"]) == 2  # New Year 00:00 Berlin, twice in 800 days
    runs = cli(service, "runs", "list", "--job", job_id, "--page-size", "50")
    assert run["run_id"] in {r["run_id"] for r in runs.get("runs", [])}
    first, second = backfill["run_ids"]
    wait_for(lambda: _status(service, first) == "RUN_STATUS_RUNNING", 30,
             "the first backfilled run running")
    for run_id in (second, first):  # one held, one executing
        assert cli(service, "runs", "cancel", run_id)["run"]["status"] == "RUN_STATUS_CANCELLED"
    assert "FAILED_PRECONDITION" in cli(service, "runs", "cancel", run["run_id"], ok=False), \
        "an ended run cannot be cancelled"
    filtered = cli(service, "runs", "list", "--tenant", tenant, "--status", "succeeded",
                   "--scheduled-after", (now - timedelta(minutes=5)).isoformat())
    assert all(r["status"] == "RUN_STATUS_SUCCEEDED" for r in filtered.get("runs", []))

    preview = cli(service, "preview", "0 9 * * *", "--time-zone", "Asia/Kolkata", "--count", "2",
                  "--after", "2026-01-01T00:00:00+00:00")
    assert preview["fire_times"] == ["2026-01-01T03:30:00Z", "2026-01-02T03:30:00Z"]
    assert "needs an offset" in cli(service, "preview", "* * * * *", "--after",
                                    "2026-01-01T00:00:00", ok=False)
    assert cli(service, "jobs", "delete", job_id)["job"]["status"] == "JOB_STATUS_DELETED"


def _status(service: RunningService, run_id: str) -> str | None:
    done = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli",
                           "--address", service.address, "runs", "get", run_id],
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout)["run"]["status"] if done.returncode == 0 else None

