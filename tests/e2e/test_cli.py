"""The `cronlog` CLI does everything the gRPC API does, against the real service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronlog.infra.entrypoints.cli import main as cli_main
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", *args],
                          capture_output=True, text=True, timeout=90,
                          env={**os.environ, **(env or {})})


def cli(service: RunningService, *args: str, ok: bool = True, exit_code: int = 1) -> Any:
    """The parsed JSON answer; or, with ok=False, the error, which is on stderr alone."""
    done = run_cli("--address", service.address, *args)
    if not ok:
        assert done.returncode == exit_code, done.stdout + done.stderr
        assert done.stdout == "", "an error prints nothing on stdout"
        return done.stderr
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
    ended = cli(service, "runs", "wait", run["run_id"], "--timeout", "30")["run"]
    assert ended["status"] == "RUN_STATUS_SUCCEEDED", "runs wait: exit 0 once it succeeded"

    now = datetime.now(UTC)
    # Slow runs, one at a time: the second backfilled run waits while the first runs. Both
    # are cancelled below; they run far longer than a starved machine can take to get there
    # (at 30 s, with the job's 30 s timeout, the first once ended before its cancel).
    cli(service, "jobs", "update", job_id, "--handler", "sleep", "--payload",
        '{"seconds": 600}', "--timeout-seconds", "900")
    backfill = cli(service, "jobs", "backfill", job_id, "--from",
                   (now - timedelta(days=800)).isoformat(), "--until",
                   (now - timedelta(days=1)).isoformat())
    assert len(backfill["run_ids"]) == 2  # New Year 00:00 Berlin, twice in 800 days
    runs = cli(service, "runs", "list", "--job", job_id, "--page-size", "50")
    assert run["run_id"] in {r["run_id"] for r in runs.get("runs", [])}
    first, second = backfill["run_ids"]
    wait_for(lambda: _status(service, first) == "RUN_STATUS_RUNNING", 30,
             "the first backfilled run running")
    waited = run_cli("--address", service.address, "runs", "wait", first, "--timeout", "1")
    assert waited.returncode == 4, waited.stdout + waited.stderr
    # Running, or scheduled again: on a starved machine a late heartbeat may lose the
    # attempt (its timeout is 10 s) and the run waits for its retry.
    status = json.loads(waited.stdout)["run"]["status"]
    assert status in ("RUN_STATUS_RUNNING", "RUN_STATUS_SCHEDULED"), status
    shown = status.removeprefix("RUN_STATUS_").lower()
    assert f"run {first} had not ended within 1 s ({shown})" in waited.stderr
    for run_id in (second, first):  # one held, one executing
        assert cli(service, "runs", "cancel", run_id)["run"]["status"] == "RUN_STATUS_CANCELLED"
    waited = run_cli("--address", service.address, "runs", "wait", second)
    assert waited.returncode == 3, "runs wait: exit 3 when the run ended otherwise"
    assert json.loads(waited.stdout)["run"]["status"] == "RUN_STATUS_CANCELLED"
    assert "--timeout: between 0 and 3600" in cli(service, "runs", "wait", second,
                                                  "--timeout", "0", ok=False, exit_code=2)
    assert "FAILED_PRECONDITION" in cli(service, "runs", "cancel", run["run_id"], ok=False), \
        "an ended run cannot be cancelled"
    filtered = cli(service, "runs", "list", "--tenant", tenant, "--status", "succeeded",
                   "--scheduled-after", (now - timedelta(minutes=5)).isoformat())
    assert all(r["status"] == "RUN_STATUS_SUCCEEDED" for r in filtered.get("runs", []))

    preview = cli(service, "preview", "0 9 * * *", "--time-zone", "Asia/Kolkata", "--count", "2",
                  "--after", "2026-01-01T00:00:00+00:00")
    assert preview["fire_times"] == ["2026-01-01T03:30:00Z", "2026-01-02T03:30:00Z"]
    assert "needs an offset" in cli(service, "preview", "* * * * *", "--after",
                                    "2026-01-01T00:00:00", ok=False, exit_code=2)
    assert cli(service, "jobs", "delete", job_id)["job"]["status"] == "JOB_STATUS_DELETED"


def _status(service: RunningService, run_id: str) -> str | None:
    done = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli",
                           "--address", service.address, "runs", "get", run_id],
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout)["run"]["status"] if done.returncode == 0 else None



def _job(service: RunningService, tenant: str, *options: str) -> dict[str, Any]:
    # Starting in two days, the job cannot fire (and so change its next fire time and version)
    # during the test: created a moment before 03:30 UTC, it once did.
    starts = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    job: dict[str, Any] = cli(service, "jobs", "create", "--name", "cli", "--tenant", tenant,
                              "--handler", "echo", "--cron", "0 9 * * *", "--start-at", starts,
                              *options)["job"]
    return job


def test_an_update_does_not_overwrite_a_change_made_after_it_read_the_job(
        service: RunningService, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """Two people update one job at once. The other one's update lands between this CLI's
    read and its write: the CLI's write is refused (it once sent version 0, "any", and
    silently overwrote the other change), and the other change stays."""
    job = _job(service, "cli-" + uuid.uuid4().hex[:6], "--payload", "v1")
    job_id, read_version = job["job_id"], int(job["version"])

    real_stub = pb_grpc.JobServiceStub

    def someone_else_first(channel: Any) -> Any:
        stub = real_stub(channel)
        read = stub.GetJob

        def read_then_theirs(request: Any, **kwargs: Any) -> Any:
            answer = read(request, **kwargs)
            theirs = cli(service, "jobs", "update", job_id, "--payload", "theirs")["job"]
            assert int(theirs["version"]) == read_version + 1
            return answer

        stub.GetJob = read_then_theirs
        return stub

    monkeypatch.setattr(pb_grpc, "JobServiceStub", someone_else_first)
    exit_code = cli_main(["jobs", "update", job_id, "--payload", "mine",
                          "--address", service.address])
    out, err = capfd.readouterr()
    assert exit_code == 1 and out == ""
    assert f"cronlog jobs update: error: FAILED_PRECONDITION: job {job_id} is at version " \
           f"{read_version + 1}, not {read_version}" in err
    assert "hint:" in err
    monkeypatch.undo()
    kept = cli(service, "jobs", "get", job_id)["job"]
    assert kept["spec"]["payload"] == "dGhlaXJz"  # base64 of "theirs"
    assert int(kept["version"]) == read_version + 1


def test_errors_go_to_stderr_with_the_status_and_the_field(service: RunningService) -> None:
    refused = cli(service, "jobs", "create", "--name", "cli", "--tenant", "cli-errors",
                  "--handler", "echo", "--cron", "* * * * *", "--time-zone", "Mars/Olympus",
                  ok=False)
    assert refused.startswith("cronlog jobs create: error: INVALID_ARGUMENT: ")
    assert "(field: spec.time_zone)" in refused
    missing = str(uuid.uuid4())
    assert "cronlog runs get: error: NOT_FOUND" in cli(service, "runs", "get", missing,
                                                       ok=False)
    usage = run_cli("jobs", "list", "-o", "yaml")
    assert usage.returncode == 2 and usage.stdout == "" and "--output" in usage.stderr


def test_tables_for_people_with_the_address_after_the_subcommand(
        service: RunningService) -> None:
    tenant = "cli-" + uuid.uuid4().hex[:6]
    job = _job(service, tenant, "--time-zone", "Asia/Kolkata")
    # Were --address after the subcommand ignored, the CLI would call this dead address.
    nowhere = {"CRONLOG_GRPC_ADDRESS": "127.0.0.1:9"}

    listed = run_cli("jobs", "list", "--tenant", tenant, "--address", service.address,
                     "-o", "table", env=nowhere)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[:6] == ["JOB", "ID", "NAME", "TENANT", "STATUS", "SCHEDULE"]
    next_fire = datetime.fromisoformat(job["next_fire_at"].replace("Z", "+00:00"))
    assert row.split() == [job["job_id"], "cli", tenant, "active", "0", "9", "*", "*", "*",
                           "Asia/Kolkata", *next_fire.strftime("%Y-%m-%d %H:%M:%SZ").split(),
                           job["version"]]

    run = cli(service, "jobs", "trigger", job["job_id"])["run"]
    wait_for(lambda: _status(service, run["run_id"]) == "RUN_STATUS_SUCCEEDED", 30,
             "the manual run succeeding")
    shown = run_cli("runs", "get", run["run_id"], "--output", "table",
                    "--address", service.address, env=nowhere)
    assert shown.returncode == 0, shown.stderr
    run_part, attempts_part = shown.stdout.split("\n\n")
    assert run_part.splitlines()[1].split()[:5] == [run["run_id"], job["job_id"], tenant,
                                                    "succeeded", "manual"]
    attempts = [line.split() for line in attempts_part.splitlines()]
    assert attempts[0][:3] == ["#", "STATUS", "WORKER"] and len(attempts) == 2
    assert attempts[1][:2] == ["1", "succeeded"]

    preview = run_cli("preview", "0 9 * * *", "--time-zone", "Asia/Kolkata", "--count", "1",
                      "--after", "2026-01-01T00:00:00+00:00", "-o", "table",
                      "--address", service.address, env=nowhere)
    # The expression in words, then each fire time with its wall time and offset (a note
    # only where DST moved it: Kolkata has none).
    lines = [line for line in preview.stdout.splitlines() if line]
    assert lines[0] == "at 09:00 every day, Asia/Kolkata", preview.stdout + preview.stderr
    assert lines[1].split() == ["FIRE", "TIME", "(UTC)", "LOCAL", "(Asia/Kolkata)", "OFFSET",
                                "NOTE"], preview.stdout
    assert lines[2].split() == ["2026-01-01", "03:30:00Z", "2026-01-01", "09:00:00",
                                "+05:30"], preview.stdout
    assert len(lines) == 3, preview.stdout

