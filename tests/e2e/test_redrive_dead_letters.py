"""Re-driving a tenant's dead letters over the real stack (issue 37 item 4, docs/lifecycle.md
"Re-driving dead letters"): RedriveDeadLetters chooses the tenant's dead letters of a window
of fire times, oldest first, at most `limit` a call, and re-drives each as RedriveRun would;
another tenant's dead letters are not touched; a call retried with its request id re-drives
no run twice; a bad window is INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import cast

import grpc
import pytest

from cronlog.infra.composition import build_run_history
from cronlog.infra.config import Settings
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.e2e.test_redrive import cronlog, the_run
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e


def failing_job(stub: pb_grpc.JobServiceStub, tenant: str, times: int, at: datetime) -> pb.Job:
    """A one-off job at `at` of one attempt, whose attempts fail while their number is at
    most `times` (the `fail` handler)."""
    spec = pb.JobSpec(name="flaky", tenant=tenant, handler="fail",
                      payload=json.dumps({"times": times}).encode(),
                      retry_policy=pb.RetryPolicy(max_attempts=1))
    spec.at.FromDatetime(at)
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job


def redrive(stub: pb_grpc.JobServiceStub, request_id: str, tenant: str, since: datetime,
            **fields: object) -> pb.RedriveDeadLettersResponse:
    request = pb.RedriveDeadLettersRequest(request_id=request_id, tenant=tenant, **fields)  # type: ignore[arg-type]
    request.since.FromDatetime(since)
    return stub.RedriveDeadLetters(request, timeout=60)


def field_of(error: grpc.RpcError) -> str:
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailing = cast("tuple[tuple[str, str], ...]", error.trailing_metadata() or ())
    return dict(trailing).get("cronlog-field", "")


def test_a_tenants_dead_letters_of_a_window_are_redriven_a_limit_at_a_time(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant, other = "dl-" + uuid.uuid4().hex[:6], "dl-" + uuid.uuid4().hex[:6]
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    # Two that succeed when re-driven, one that fails again; the other tenant's one.
    jobs = [failing_job(stub, tenant, times, start + timedelta(seconds=n))
            for n, times in enumerate((1, 1, 5))]
    theirs = failing_job(stub, other, 5, start)
    dead = [the_run(stub, job.job_id, pb.RUN_STATUS_DEAD_LETTERED) for job in jobs]
    their_dead = the_run(stub, theirs.job_id, pb.RUN_STATUS_DEAD_LETTERED)
    since = start - timedelta(seconds=1)

    # The oldest two first; one more is left.
    first = redrive(stub, rid(), tenant, since, limit=2)
    assert [(r.run_id, r.outcome) for r in first.runs] == [
        (d.run_id, pb.REDRIVE_OUTCOME_REDRIVEN) for d in dead[:2]]
    assert first.more

    # The next call, through the CLI, finds only the one still dead-lettered.
    request_id = rid()
    done = cronlog(service, "dead-letters", "redrive", "--tenant", tenant, "--since",
                   since.isoformat(), "--request-id", request_id)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert [(r["run_id"], r["outcome"]) for r in answer["runs"]] == [
        (dead[2].run_id, "REDRIVE_OUTCOME_REDRIVEN")]
    assert not answer.get("more")

    # They run again under their own ids: the first two succeed, the third fails again.
    for run in dead[:2]:
        ended = the_run(stub, run.job_id, pb.RUN_STATUS_SUCCEEDED)
        assert ended.run_id == run.run_id
        assert [(a.number, a.status) for a in ended.attempts] == [
            (1, pb.ATTEMPT_STATUS_FAILED), (2, pb.ATTEMPT_STATUS_SUCCEEDED)]
    wait_for(lambda: len(stub.GetRun(pb.GetRunRequest(run_id=dead[2].run_id),
                                     timeout=10).run.attempts) == 2 or None,
             60, "the third run's second attempt")
    again_dead = the_run(stub, dead[2].job_id, pb.RUN_STATUS_DEAD_LETTERED)
    assert len(again_dead.attempts) == 2

    # The second call retried with its request id: the third run is a dead letter again,
    # but its re-drive under this id was done; the owner answers it so and does nothing.
    retried = redrive(stub, request_id, tenant, since)
    assert [(r.run_id, r.outcome) for r in retried.runs] == [
        (dead[2].run_id, pb.REDRIVE_OUTCOME_REDRIVEN_BEFORE)]
    time.sleep(2)
    assert len(stub.GetRun(pb.GetRunRequest(run_id=dead[2].run_id), timeout=10
                           ).run.attempts) == 2, "no third attempt"

    # The other tenant's dead letter was never chosen.
    still = stub.GetRun(pb.GetRunRequest(run_id=their_dead.run_id), timeout=10).run
    assert still.status == pb.RUN_STATUS_DEAD_LETTERED and len(still.attempts) == 1

    # ClickHouse: one RunRedriven a run, whatever the calls.
    settings = service.settings
    assert isinstance(settings, Settings)
    history = build_run_history(settings)

    def redriven() -> dict[str, int] | None:
        rows = history.execute(
            f"SELECT run_id, count() FROM {settings.clickhouse_database}.run_events FINAL "
            "WHERE run_id IN %(r)s AND event_type = 'RunRedriven' GROUP BY run_id",
            {"r": tuple(d.run_id for d in [*dead, their_dead])})
        found = {str(run_id): int(count) for run_id, count in rows}
        return found if len(found) == 3 else None

    assert wait_for(redriven, 30, "the re-drives in history") == {
        d.run_id: 1 for d in dead}


def test_a_bad_window_is_refused_naming_its_field(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    now = datetime.now(UTC)
    for fields, field in (
            ({"since": now}, "until"),  # until defaults to now: not after since
            ({"since": now - timedelta(days=40)}, "since"),
            ({"since": now - timedelta(days=1), "limit": 101}, "limit")):
        since = fields.pop("since")
        assert isinstance(since, datetime)
        with pytest.raises(grpc.RpcError) as refused:
            redrive(stub, rid(), "dl-bad", since + timedelta(seconds=5) if field == "until"
                    else since, **fields)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert field_of(refused.value) == field
    with pytest.raises(grpc.RpcError) as missing:
        stub.RedriveDeadLetters(pb.RedriveDeadLettersRequest(request_id=rid(),
                                                             tenant="dl-bad"), timeout=30)
    assert missing.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_of(missing.value) == "since"
