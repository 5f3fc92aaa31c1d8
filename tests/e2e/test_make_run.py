"""`make run` as a user runs it: the CRONLOG_* settings given reach every role (and the
topics it provisions), the stack's own addresses and passwords are refused before anything
starts, and the env file it writes is all operator commands need."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronlog.infra.env_file import parse_env_file
from tests.conftest import ROOT
from tests.support.run_service import (
    RunService,
    launcher_command,
    launcher_environment,
    run_service,
)

pytestmark = pytest.mark.e2e

SETTINGS = {"CRONLOG_PARTITIONS": "12", "CRONLOG_TENANT_MAX_IN_FLIGHT": "1000000",
            "CRONLOG_WORKER_SLOTS": "3", "CRONLOG_REPLY_TIMEOUT_MS": "20000"}
CRONLOG = str(Path(sys.executable).parent / "cronlog")


@pytest.fixture(scope="module")
def service() -> Iterator[RunService]:
    with run_service(SETTINGS) as running:
        yield running


def test_every_role_runs_with_the_users_settings(service: RunService) -> None:
    from confluent_kafka.admin import AdminClient

    roles = service.role_pids()
    assert set(roles) == {"api", "scheduler", "worker", "projector", "notifier", "console"}
    for role in roles:
        environ = service.role_environ(role)
        for name, value in SETTINGS.items():
            assert environ.get(name) == value, (role, name)
        # Not the session's own variables: the roles get what the launcher decided.
        assert "CRONLOG_TEST_PORT_OFFSET" not in environ
    # The topics were provisioned with the user's partition count too.
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{service.ports['kafka']}"})
    topics = admin.list_topics(timeout=30).topics
    for topic in ("cronlog.inbox", "cronlog.job-events", "cronlog.run-events",
                  "cronlog.dispatch.default"):
        assert len(topics[topic].partitions) == 12, topic
    banner = service.banner
    assert "CRONLOG_PARTITIONS=12" in banner and "CRONLOG_WORKER_SLOTS=3" in banner
    assert "CRONLOG_TENANT_MAX_IN_FLIGHT=1000000" in banner
    # Relative to where `make run` runs, as a user copies it.
    assert f"export CRONLOG_ENV_FILE={service.env_file.relative_to(ROOT)}\n" in banner


def test_the_banner_says_where_the_history_is_and_its_query_runs(service: RunService) -> None:
    lines = service.banner.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Run history: ClickHouse"))
    assert f"127.0.0.1:{service.ports['clickhouse']}, user cronlog" in lines[at]
    query = lines[at + 1].strip()
    assert " .venv/bin/cronlog sql " in query
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONLOG_")}
    done = subprocess.run(["bash", "-c", query], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("run_status\tcount()")


def cronlog(service: RunService, *argv: str) -> subprocess.CompletedProcess[str]:
    """`cronlog ARGV` in a shell that has only the banner's `export CRONLOG_ENV_FILE`."""
    return subprocess.run([CRONLOG, *argv], env=service.cli_env(), capture_output=True,
                          text=True, timeout=180, check=False)


def test_operator_commands_work_with_only_the_env_file(service: RunService) -> None:
    assert stat.S_IMODE(service.env_file.stat().st_mode) == 0o600
    written = parse_env_file(service.env_file.read_text(), str(service.env_file))
    assert written["CRONLOG_GRPC_ADDRESS"] == service.grpc_address
    assert written["CRONLOG_PARTITIONS"] == "12"
    assert "CRONLOG_RUN_PORT_OFFSET" not in written  # the launcher's, not the service's
    tenant = "envfile-" + uuid.uuid4().hex[:6]
    created = cronlog(service, "--env-file", str(service.env_file), "jobs", "create",
                      "--name", "hello", "--tenant", tenant, "--handler", "echo",
                      "--payload", "hi", "--cron", "*/10 * * * * *",
                      "--time-zone", "Europe/Berlin")
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["job"]["job_id"]
    # The client found the api through the file alone (CRONLOG_ENV_FILE, no --address).
    listed = cronlog(service, "jobs", "list", "--tenant", tenant)
    assert listed.returncode == 0, listed.stderr
    assert [j["job_id"] for j in json.loads(listed.stdout)["jobs"]] == [job_id]
    audit = cronlog(service, "--env-file", str(service.env_file), "audit", "job", job_id)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "JobCreated" in audit.stdout
    replay = cronlog(service, "replay")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "mismatches" in replay.stdout


def refused(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # Offset 1 from no one's ports: refused before any port is checked or bound.
    return subprocess.run(launcher_command(),
                          env=launcher_environment(env, -20001, tmp_path / "state"),
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_stacks_own_settings_are_refused_before_anything_starts(tmp_path: Path) -> None:
    done = refused({"CRONLOG_KAFKA_BOOTSTRAP": "elsewhere:9092",
                    "CRONLOG_CLICKHOUSE_PASSWORD": "hunter2", "CRONLOG_PARTITIONS": "16"},
                   tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("cannot start: CRONLOG_KAFKA_BOOTSTRAP, "
                                  "CRONLOG_CLICKHOUSE_PASSWORD are `make run`'s own")
    assert "hunter2" not in done.stdout + done.stderr
    assert "starting" not in done.stdout
    assert not (tmp_path / "state" / "run" / "kafka").exists()


def test_an_invalid_value_is_refused_with_the_services_own_error(tmp_path: Path) -> None:
    done = refused({"CRONLOG_PARTITIONS": "many"}, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.strip() == ("cannot start: CRONLOG_PARTITIONS: expected an integer, "
                                   "got 'many'")
