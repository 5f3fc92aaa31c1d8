"""CancelRun, the overlap policies and BackfillJob over gRPC against the real stack."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import grpc
import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.e2e.service_groups import WORK
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
# The stubborn handler, a cancel grace, and webhooks to loopback allowed.
SERVICE = WORK


def tenant() -> str:
    return "t-" + uuid.uuid4().hex[:6]


def get_run(stub: pb_grpc.JobServiceStub, run_id: str) -> pb.Run | None:
    try:
        return stub.GetRun(pb.GetRunRequest(run_id=run_id), timeout=10).run
    except grpc.RpcError:
        return None


def runs_of(stub: pb_grpc.JobServiceStub, job_id: str) -> list[pb.Run]:
    return list(stub.ListRuns(pb.ListRunsRequest(job_id=job_id, page_size=500), timeout=10).runs)


def create(stub: pb_grpc.JobServiceStub, spec: pb.JobSpec) -> pb.Job:
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job


def test_cancelling_a_running_run_tells_its_handler_then_stops_it(
        service: RunningService, tmp_path: Path) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    marker = tmp_path / "stubborn.log"
    spec = pb.JobSpec(name="stubborn", tenant=tenant(), handler="stubborn",
                      payload=json.dumps({"marker": str(marker)}).encode())
    spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    job = create(stub, spec)
    (run,) = wait_for(lambda: [r for r in runs_of(stub, job.job_id)
                               if r.status == pb.RUN_STATUS_RUNNING], 30, "the run running")
    cancelled = stub.CancelRun(pb.CancelRunRequest(request_id=rid(), run_id=run.run_id),
                               timeout=30).run
    assert cancelled.status == pb.RUN_STATUS_CANCELLED
    lines = wait_for(lambda: (lambda t: t if "stopped" in t else None)(
        marker.read_text().split() if marker.exists() else []), 20,
        "the handler told to stop, then stopped by force")
    assert lines == ["started", "told", "stopped"]
    final = wait_for(lambda: (lambda r: r if r and r.attempts and r.attempts[0].status ==
                              pb.ATTEMPT_STATUS_CANCELLED else None)(get_run(stub, run.run_id)),
                     20, "history showing the cancelled attempt")
    assert final.status == pb.RUN_STATUS_CANCELLED and "cancelled by request" in final.reason
    # Cancelling again is answered the same way; nothing else changes.
    again = stub.CancelRun(pb.CancelRunRequest(request_id=rid(), run_id=run.run_id), timeout=30)
    assert again.run.status == pb.RUN_STATUS_CANCELLED


def test_cancelling_a_waiting_run_keeps_its_next_attempt_from_starting(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    spec = pb.JobSpec(name="waiting", tenant=tenant(), handler="fail", payload=b'{"times": 5}',
                      cron="0 0 1 1 *")
    spec.retry_policy.max_attempts = 3
    # Beyond the lookahead (8 s by default), so the retry waits in the scheduler.
    spec.retry_policy.initial_backoff.FromSeconds(12)
    spec.retry_policy.jitter = 0.0
    job = create(stub, spec)
    manual = stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30).run

    def waiting_for_retry() -> pb.Run | None:
        r = get_run(stub, manual.run_id)
        return r if r and len(r.attempts) == 2 else None

    retrying = wait_for(waiting_for_retry, 30,
                        "the first attempt failed and the second waiting")
    # Its backoff is longer than the lookahead: it waits in the scheduler, no worker holds it.
    assert retrying.attempts[1].status == pb.ATTEMPT_STATUS_WAITING
    cancelled = stub.CancelRun(pb.CancelRunRequest(request_id=rid(), run_id=manual.run_id),
                               timeout=30).run
    assert cancelled.status == pb.RUN_STATUS_CANCELLED
    final = wait_for(lambda: (lambda r: r if r and r.attempts[-1].status ==
                              pb.ATTEMPT_STATUS_CANCELLED else None)(
        get_run(stub, manual.run_id)), 20, "the waiting attempt cancelled in history")
    assert not final.attempts[1].HasField("started_at")
    # A run that has ended cannot be cancelled.
    echo = pb.JobSpec(name="quick", tenant=spec.tenant, handler="echo", cron="0 0 1 1 *")
    quick = create(stub, echo)
    done = stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=quick.job_id),
                           timeout=30).run
    wait_for(lambda: (r := get_run(stub, done.run_id)) and r.status == pb.RUN_STATUS_SUCCEEDED,
             30, "the quick run succeeding")
    with pytest.raises(grpc.RpcError) as ended:
        stub.CancelRun(pb.CancelRunRequest(request_id=rid(), run_id=done.run_id), timeout=30)
    assert ended.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as unknown:
        stub.CancelRun(pb.CancelRunRequest(request_id=rid(), run_id=str(uuid.uuid4())),
                       timeout=30)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def _serial(spans: list[tuple[int, int]]) -> bool:
    """No attempt started before the one before it had finished."""
    return all(a_end <= b_start for (_, a_end), (b_start, _) in pairwise(spans))


def _spans(runs: list[pb.Run]) -> list[tuple[int, int]]:
    return sorted((a.started_at.ToMicroseconds(), a.finished_at.ToMicroseconds())
                  for r in runs for a in r.attempts if a.HasField("started_at"))


def test_overlap_policies_skip_buffer_and_cancel(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    owner = tenant()
    jobs = {}
    for policy in (pb.OVERLAP_POLICY_SKIP, pb.OVERLAP_POLICY_BUFFER_ONE,
                   pb.OVERLAP_POLICY_CANCEL_OTHER):
        # Each run takes 2.5 s, and the job fires every second.
        spec = pb.JobSpec(name=f"overlap-{policy}", tenant=owner, handler="sleep",
                          payload=b'{"seconds": 2.5}', cron="* * * * * *", overlap_policy=policy)
        jobs[policy] = create(stub, spec).job_id

    def enough() -> bool:
        return all(sum(r.status == pb.RUN_STATUS_SUCCEEDED or r.status == pb.RUN_STATUS_CANCELLED
                       for r in runs_of(stub, j)) >= 2 for j in jobs.values())

    wait_for(enough, 60, "two runs ended under each policy", interval=1)
    for j in jobs.values():
        stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=j), timeout=30)

    skip = runs_of(stub, jobs[pb.OVERLAP_POLICY_SKIP])
    skipped = [r for r in skip if r.status == pb.RUN_STATUS_SKIPPED]
    assert skipped and all("overlap policy skip" in r.reason for r in skipped)
    spans = _spans([r for r in skip if r.status == pb.RUN_STATUS_SUCCEEDED])
    assert _serial(spans), \
        "skipped runs never overlap"

    buffered = runs_of(stub, jobs[pb.OVERLAP_POLICY_BUFFER_ONE])
    assert any(r.status == pb.RUN_STATUS_SKIPPED and "waits" in r.reason for r in buffered)
    spans = _spans([r for r in buffered if r.status == pb.RUN_STATUS_SUCCEEDED])
    assert len(spans) >= 2
    assert _serial(spans), \
        "a buffered run starts after the one before it ended"

    replaced = runs_of(stub, jobs[pb.OVERLAP_POLICY_CANCEL_OTHER])
    cancelled = [r for r in replaced if r.status == pb.RUN_STATUS_CANCELLED
                 and "replaced by" in r.reason]
    assert cancelled, "a new fire time cancels the run still going"


def test_backfill_runs_past_fire_times_one_at_a_time(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    now = datetime.now(UTC).replace(microsecond=0)
    now -= timedelta(seconds=now.second % 2)  # on the job's even seconds
    spec = pb.JobSpec(name="backfill", tenant=tenant(), handler="sleep",
                      payload=b'{"seconds": 0.5}', cron="*/2 * * * * *",
                      overlap_policy=pb.OVERLAP_POLICY_SKIP)
    spec.end_at.FromDatetime(now - timedelta(seconds=1))  # the job fires no more by itself
    job = create(stub, spec)
    request = pb.BackfillJobRequest(request_id=rid(), job_id=job.job_id)
    getattr(request, "from").FromDatetime(now - timedelta(seconds=20))
    request.until.FromDatetime(now - timedelta(seconds=12))
    run_ids = list(stub.BackfillJob(request, timeout=30).run_ids)
    assert len(run_ids) == 4
    assert list(stub.BackfillJob(request, timeout=30).run_ids) == run_ids, "a retry"

    def all_done() -> list[pb.Run] | None:
        runs = [get_run(stub, r) for r in run_ids]
        done = [r for r in runs if r and r.status == pb.RUN_STATUS_SUCCEEDED]
        return done if len(done) == len(run_ids) else None

    runs = wait_for(all_done, 40, "every backfilled run succeeding")
    assert all(r.trigger == "backfill" for r in runs)
    fire_times = sorted(r.scheduled_at.ToDatetime(tzinfo=UTC) for r in runs)
    assert fire_times == [now - timedelta(seconds=s) for s in (18, 16, 14, 12)]
    spans = _spans(runs)
    assert _serial(spans), \
        "under overlap policy SKIP a backfill runs one at a time"

    future = pb.BackfillJobRequest(request_id=rid(), job_id=job.job_id)
    getattr(future, "from").FromDatetime(now)
    future.until.FromDatetime(now + timedelta(hours=1))
    with pytest.raises(grpc.RpcError) as bad:
        stub.BackfillJob(future, timeout=30)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "until" in (bad.value.details() or "")


def update_at_its_version(stub: pb_grpc.JobServiceStub, job_id: str, spec: pb.JobSpec) -> None:
    """An update as a client makes it on a job that fires every second: each fire moves its
    version on, so one read before the update may be a version behind by the time the owner
    decides it (FAILED_PRECONDITION); read it again and retry, a bounded number of times."""
    for _ in range(5):
        current = stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10).job
        try:
            stub.UpdateJob(pb.UpdateJobRequest(request_id=rid(), job_id=job_id,
                                               expected_version=current.version, spec=spec),
                           timeout=30)
            return
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
    raise AssertionError(f"job {job_id}: no update at its version in 5 tries")


def test_pause_and_update_deal_with_runs_enqueued_but_not_started(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    # Every second with a 2 s lookahead: at any moment a run or two wait at the workers.
    spec = pb.JobSpec(name="enqueued", tenant=tenant(), handler="echo", payload=b"v1",
                      cron="* * * * * *")
    job = create(stub, spec)
    wait_for(lambda: any(r.status == pb.RUN_STATUS_SUCCEEDED for r in runs_of(stub, job.job_id)),
             30, "a first run")
    spec.payload = b"v2"
    update_at_its_version(stub, job.job_id, spec)

    def redispatched() -> list[pb.Run]:
        return [r for r in runs_of(stub, job.job_id) if len(r.attempts) >= 2
                and r.attempts[0].status == pb.ATTEMPT_STATUS_CANCELLED
                and r.status == pb.RUN_STATUS_SUCCEEDED]

    (run, *_) = wait_for(redispatched, 30, "a waiting run dispatched again with the new spec")
    assert run.attempts[1].output == b"v2", "it ran what the job says now"

    stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=job.job_id), timeout=30)
    cancelled = wait_for(lambda: [r for r in runs_of(stub, job.job_id)
                                  if r.status == pb.RUN_STATUS_CANCELLED], 30,
                         "waiting runs cancelled by the pause")
    assert all("job paused" in r.reason for r in cancelled)
    assert all(not a.HasField("started_at") for r in cancelled for a in r.attempts)


def test_one_off_and_bounded_jobs_complete_after_their_last_run(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    owner = tenant()
    one_off = pb.JobSpec(name="once", tenant=owner, handler="echo")
    one_off.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    first = create(stub, one_off)
    bounded = pb.JobSpec(name="bounded", tenant=owner, handler="echo", cron="* * * * * *")
    # Its first fire time after it exists, or it has fewer than three: a starved run once
    # took over 3 s to create the two jobs.
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=10)
    bounded.start_at.FromDatetime(start)
    bounded.end_at.FromDatetime(start + timedelta(seconds=2))
    jobs = [first, create(stub, bounded)]
    assert datetime.now(UTC) < start, "the bounded job was created after its first fire time"

    def completed(job: pb.Job) -> bool:
        got = stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10).job
        return bool(got.status == pb.JOB_STATUS_COMPLETED)

    for job in jobs:
        # A lambda that binds by a default is beyond mypy (python/mypy#15459).
        wait_for(lambda job=job: completed(job), 30, f"{job.spec.name} completed")  # type: ignore[misc]
    # A job completes when its last fire time is fired; history shows the runs a moment later.
    wait_for(lambda: len(runs_of(stub, jobs[0].job_id)) == 1, 20, "the one-off's run")
    runs = wait_for(lambda: (lambda r: r if len(r) >= 3 else None)(
        runs_of(stub, jobs[1].job_id)), 20, "the bounded job's runs")
    times = sorted(r.scheduled_at.ToDatetime(tzinfo=UTC) for r in runs)
    assert times == [start, start + timedelta(seconds=1), start + timedelta(seconds=2)]


def test_retry_policy_timeout_and_non_retryable_errors(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    owner = tenant()
    slow = pb.JobSpec(name="slow", tenant=owner, handler="sleep", payload=b'{"seconds": 30}',
                      cron="0 0 1 1 *")
    slow.timeout.FromSeconds(1)
    slow.retry_policy.max_attempts = 2
    slow.retry_policy.initial_backoff.FromMilliseconds(100)
    fatal = pb.JobSpec(name="fatal", tenant=owner, handler="fail", payload=b'{"times": 5}',
                       cron="0 0 1 1 *")
    fatal.retry_policy.max_attempts = 5
    fatal.retry_policy.non_retryable_errors.append("DeliberateFailure")
    runs = []
    for spec in (slow, fatal):
        job = create(stub, spec)
        runs.append(stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job.job_id),
                                    timeout=30).run.run_id)

    def dead(run_id: str) -> pb.Run | None:
        r = get_run(stub, run_id)
        return r if r and r.status == pb.RUN_STATUS_DEAD_LETTERED else None

    timed_out = wait_for(lambda: dead(runs[0]), 40, "the slow run timed out twice")
    assert [a.status for a in timed_out.attempts] == [pb.ATTEMPT_STATUS_TIMED_OUT] * 2
    not_retried = wait_for(lambda: dead(runs[1]), 30, "the fatal run dead-lettered")
    assert len(not_retried.attempts) == 1 and "not retryable" in not_retried.reason
    assert not_retried.attempts[0].error.startswith("DeliberateFailure")


def test_handlers_get_the_idempotency_key_and_attempt_and_output_is_bounded(
        service: RunningService) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict[str, str]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            seen.append({k: v for k, v in self.headers.items()})
            # The first attempt fails, the retry succeeds: both carry the same key.
            self.send_response(500 if len(seen) == 1 else 200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        stub = pb_grpc.JobServiceStub(service.channel)
        owner = tenant()
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        hook = pb.JobSpec(name="hook", tenant=owner, handler="http", cron="0 0 1 1 *",
                          payload=json.dumps({"url": url, "body": {"x": 1}}).encode())
        hook.retry_policy.initial_backoff.FromMilliseconds(100)
        job = create(stub, hook)
        run_id = stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job.job_id),
                                 timeout=30).run.run_id
        run = wait_for(lambda: (lambda r: r if r and r.status == pb.RUN_STATUS_SUCCEEDED
                                else None)(get_run(stub, run_id)), 30, "the hook's retry")
        assert [a.status for a in run.attempts] == [pb.ATTEMPT_STATUS_FAILED,
                                                    pb.ATTEMPT_STATUS_SUCCEEDED]
        assert [h["X-Cronlog-Attempt"] for h in seen] == ["1", "2"]
        assert {h["Idempotency-Key"] for h in seen} == {run.idempotency_key} == {run_id}
    finally:
        server.shutdown()

    big = pb.JobSpec(name="big", tenant=owner, handler="echo", cron="0 0 1 1 *",
                     payload=b"x" * (100 * 1024))
    job = create(stub, big)
    run_id = stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30).run.run_id
    run = wait_for(lambda: (lambda r: r if r and r.status == pb.RUN_STATUS_SUCCEEDED
                            else None)(get_run(stub, run_id)), 30, "the echo run")
    attempt = run.attempts[0]
    assert attempt.output_truncated and len(attempt.output) == 64 * 1024


def test_delete_cancels_runs_enqueued_but_not_started(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    spec = pb.JobSpec(name="doomed-soon", tenant=tenant(), handler="echo", cron="* * * * * *")
    job = create(stub, spec)
    wait_for(lambda: any(r.status == pb.RUN_STATUS_SUCCEEDED for r in runs_of(stub, job.job_id)),
             30, "a first run")
    deleted = stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30).job
    assert deleted.status == pb.JOB_STATUS_DELETED
    cancelled = wait_for(lambda: [r for r in runs_of(stub, job.job_id)
                                  if r.status == pb.RUN_STATUS_CANCELLED], 30,
                         "waiting runs cancelled by the delete")
    assert all("job deleted" in r.reason for r in cancelled)
    assert all(not a.HasField("started_at") for r in cancelled for a in r.attempts)
