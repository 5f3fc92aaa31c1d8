"""Two scheduler processes on one stack: started alike (default ids) both work; started with
the same explicit CRONLOG_INSTANCE_ID, the one that loses exits with a clear error instead of
the two fencing each other in a loop."""

from __future__ import annotations

import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from cronlog.infra.entrypoints.processes import EXIT_REPLACED
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.processes import spawn_role
from tests.e2e.conftest import RunningService, start_service, stop_service
from tests.support.polling import wait_for

# Two schedulers started at the same instant race for one instance id: with its CPU given
# away to other suites one of them was fenced mid-transaction before it could say why, so
# make test runs it with the measured modules, at normal priority (scripts/test-suites.sh).
pytestmark = [pytest.mark.e2e, pytest.mark.measured]

JOBS = 8


def _every_second_jobs(service: RunningService) -> list[str]:
    """JOBS jobs, as many on each Kafka partition (their ids derive from the request ids),
    so every scheduler has work: a twin whose partitions held none would never commit, and
    never find its producer fenced (a random spread once left one twin without work)."""
    from cronlog.domain.ids import job_id_for_request
    from cronlog.infra.config import Settings
    from cronlog.infra.kafka.partitioner import partition_for

    settings = service.settings
    assert isinstance(settings, Settings)
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "ident-" + uuid.uuid4().hex[:6]
    partitions = settings.layout.kafka
    each = -(-JOBS // partitions)
    request_ids: dict[int, list[str]] = {p: [] for p in range(partitions)}
    while any(len(ids) < each for ids in request_ids.values()):
        request_id = str(uuid.uuid4())
        on = request_ids[partition_for(str(job_id_for_request(tenant, request_id)),
                                       partitions)]
        if len(on) < each:
            on.append(request_id)
    return [stub.CreateJob(pb.CreateJobRequest(request_id=request_id, spec=pb.JobSpec(
        name=f"tick-{i}", tenant=tenant, handler="echo", cron="* * * * * *",
        time_zone="UTC")), timeout=30).job.job_id
        for i, request_id in enumerate(r for ids in request_ids.values() for r in ids)]


def _all_fired_after(service: RunningService, job_ids: list[str], instant: datetime) -> bool:
    stub = pb_grpc.JobServiceStub(service.channel)
    for job_id in job_ids:
        job = stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10).job
        if not job.HasField("last_fired_at") or \
                job.last_fired_at.ToDatetime(tzinfo=UTC) <= instant:
            return False
    return True


def _log(service: RunningService, name: str) -> str:
    path = service.log_dir / name / "scheduler.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _spawn_scheduler(service: RunningService, name: str,
                     instance_id: str | None) -> subprocess.Popen[bytes]:
    env = {"CRONLOG_INSTANCE_ID": instance_id} if instance_id else {}
    # Logs of an earlier session in the same folder must not count.
    (service.log_dir / name / "scheduler.log").unlink(missing_ok=True)
    process = spawn_role("scheduler", service.settings, service.log_dir / name,
                         env)
    service.processes[name] = process
    return process


@pytest.mark.parametrize("together", [False, True], ids=["one-after-the-other",
                                                       "at-the-same-instant"])
def test_two_schedulers_with_the_same_id_one_exits_with_a_clear_error(
        stack_settings: object, together: bool) -> None:
    """Started while the first runs, the second sees the id in the schedulers' group and
    refuses; started at the same instant, both pass that check and the one whose producer
    is fenced exits. Either way: one clear error, one scheduler firing every job."""
    name = "scheduler-same-id-" + ("together" if together else "later")
    service = start_service(stack_settings, name, roles=("api", "worker"))
    try:
        # Jobs first, under a scheduler of another id, so that the twins have work at once.
        helper = _spawn_scheduler(service, "helper", "helper")
        wait_for(lambda: "took partition" in _log(service, "helper"), 60,
                 "the helper scheduler taking partitions")
        job_ids = _every_second_jobs(service)
        wait_for(lambda: _all_fired_after(service, job_ids, datetime.now(UTC)), 60,
                 "every job firing")
        if together:
            helper.terminate()
            helper.wait(30)
        first = _spawn_scheduler(service, "first", "twin")
        if not together:
            wait_for(lambda: "took partition" in _log(service, "first"), 60,
                     "the first twin taking partitions")
            helper.terminate()
            helper.wait(30)
        second = _spawn_scheduler(service, "second", "twin")

        def one_exited() -> list[subprocess.Popen[bytes]]:
            return [p for p in (first, second) if p.poll() is not None]

        exited = wait_for(one_exited, 90, "one of the two schedulers named 'twin' exiting")
        assert len(exited) == 1, "the survivor must keep running"
        loser = exited[0]
        survivor, survivor_name = (second, "second") if loser is first else (first, "first")
        loser_log = _log(service, "first" if loser is first else "second")
        assert loser.returncode == EXIT_REPLACED, loser_log[-2000:]
        assert "CRONLOG_INSTANCE_ID" in loser_log and "'twin'" in loser_log, loser_log[-2000:]
        assert "Traceback" not in loser_log, "a clear error, not a crash"
        if not together:
            assert loser is second, "the running scheduler is left alone"
            assert "took partition" not in loser_log

        # The survivor takes every partition and keeps firing every job, unfenced.
        exited_at = datetime.now(UTC)
        wait_for(lambda: _all_fired_after(service, job_ids, exited_at + timedelta(seconds=5)),
                 90, "every job firing under the surviving scheduler")
        assert survivor.poll() is None, _log(service, survivor_name)[-2000:]
        # Fenced itself, that is; it fences the helper that left (departed_owners.py).
        survivor_log = _log(service, survivor_name)
        assert "_FENCED" not in survivor_log and "was fenced" not in survivor_log
        assert "transactional id back" not in survivor_log
    finally:
        stop_service(service)


def test_two_schedulers_started_alike_both_work(stack_settings: object,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # No CRONLOG_INSTANCE_ID at all: each process takes its own default id.
    monkeypatch.delenv("CRONLOG_INSTANCE_ID", raising=False)
    service = start_service(stack_settings, "scheduler-default-ids", roles=("api", "worker"))
    try:
        first = _spawn_scheduler(service, "first", None)
        wait_for(lambda: "took partition" in _log(service, "first"), 60,
                 "the first scheduler taking partitions")
        job_ids = _every_second_jobs(service)
        wait_for(lambda: _all_fired_after(service, job_ids, datetime.now(UTC)), 60,
                 "every job firing under the first scheduler")
        second = _spawn_scheduler(service, "second", None)
        wait_for(lambda: "took partition" in _log(service, "second"), 60,
                 "the second scheduler taking partitions")
        started = datetime.now(UTC)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert first.poll() is None, _log(service, "first")[-2000:]
            assert second.poll() is None, _log(service, "second")[-2000:]
            time.sleep(1)
        wait_for(lambda: _all_fired_after(service, job_ids, started + timedelta(seconds=10)),
                 60, "every job firing while both schedulers run")
        ids = {line.split("scheduler ", 1)[1].split(" ", 1)[0]
               for name in ("first", "second") for line in _log(service, name).splitlines()
               if " running" in line and "scheduler " in line}
        assert len(ids) == 2, f"two distinct default instance ids, got {ids}"
        for name in ("first", "second"):
            assert "fenced" not in _log(service, name).lower()
    finally:
        stop_service(service)
