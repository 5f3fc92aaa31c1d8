"""`cronlog verify` over a real service's log: a tenant's fire times through a pause and a
retry hold; the same log copied with one fire time doubled does not, and the report names
the job, the fire time and the events (issue 38). `cronlog what-if` replays one of the jobs
under another schedule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import psycopg
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config, producer_config
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.processes import settings_env
from tests.e2e.conftest import RunningService
from tests.support.polling import TimedOut, wait_for

pytestmark = pytest.mark.e2e

# A pause cancels the runs enqueued and not started.
TERMINAL = (pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_DEAD_LETTERED, pb.RUN_STATUS_MISSED,
            pb.RUN_STATUS_SKIPPED, pb.RUN_STATUS_CANCELLED)


def verify(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", "verify",
                           *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **settings_env(settings)})


def rid() -> str:
    return str(uuid.uuid4())


def every_second(stub: pb_grpc.JobServiceStub, tenant: str, name: str, start: datetime,
                 end: datetime,
                 overlap: pb.OverlapPolicy.ValueType = pb.OVERLAP_POLICY_ALLOW) -> pb.Job:
    spec = pb.JobSpec(name=name, tenant=tenant, handler="echo", cron="* * * * * *",
                      overlap_policy=overlap)
    spec.start_at.FromDatetime(start)
    spec.end_at.FromDatetime(end)
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job


def copy_with_one_doubled(settings: Settings, job_ids: set[str]) -> tuple[Settings, dict[str, Any]]:
    """The jobs' events copied to topics of another prefix, one RunScheduled written twice;
    the settings that read the copy, and the doubled record."""
    from cronlog.infra.composition import build_event_replay

    copy = settings.with_overrides(topic_prefix=f"vf{uuid.uuid4().hex[:8]}.")
    partitions = settings.layout.kafka
    admin = AdminClient(admin_config(settings))
    created = admin.create_topics([NewTopic(t, partitions, 1) for t in
                                   (copy.job_events_topic, copy.run_events_topic)])
    for future in created.values():
        future.result(30)
    producer = Producer(producer_config(settings))
    replay = build_event_replay(settings)
    doubled: dict[str, Any] = {}
    for source, target in ((settings.job_events_topic, copy.job_events_topic),
                           (settings.run_events_topic, copy.run_events_topic)):
        starts = {(source, p): 0 for p in range(partitions)}
        for _, partition, batch in replay.read_many(starts):
            for m in batch:
                if str(m.record.get("job_id")) not in job_ids:
                    continue
                at = int(m.record["at"].timestamp() * 1000)
                times = 1
                if m.name == "RunScheduled" and not doubled:
                    doubled, times = dict(m.record), 2
                for _ in range(times):
                    producer.produce(target, m.raw, key=m.key, partition=partition,
                                     timestamp=at)
    assert producer.flush(30) == 0
    return copy, doubled


def test_verify_holds_for_a_tenant_and_names_a_doubled_fire_time(
        service: RunningService) -> None:
    settings = service.settings
    assert isinstance(settings, Settings)
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "vf-" + uuid.uuid4().hex[:6]
    began = datetime.now(UTC).replace(microsecond=0)
    start = began + timedelta(seconds=2)
    end = start + timedelta(seconds=8)
    steady = every_second(stub, tenant, "steady", start, end)
    # Under SKIP a job fires at each fire time, not a lookahead ahead: its pause leaves
    # fire times to be caught up on its resume.
    paused = every_second(stub, tenant, "paused", start, end, pb.OVERLAP_POLICY_SKIP)
    flaky = pb.JobSpec(name="flaky", tenant=tenant, handler="fail",
                       payload=json.dumps({"times": 1}).encode(),
                       retry_policy=pb.RetryPolicy(max_attempts=2))
    flaky.retry_policy.initial_backoff.FromTimedelta(timedelta(milliseconds=100))
    flaky.at.FromDatetime(start)
    stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=flaky), timeout=30)
    wait_for(lambda: datetime.now(UTC) > start + timedelta(seconds=2), 10, "two fire times")
    stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=paused.job_id), timeout=30)
    wait_for(lambda: datetime.now(UTC) > start + timedelta(seconds=5), 10, "a paused while")
    stub.ResumeJob(pb.ResumeJobRequest(request_id=rid(), job_id=paused.job_id), timeout=30)

    seen: list[str] = []

    def all_ended() -> bool:
        jobs = [stub.GetJob(pb.GetJobRequest(job_id=j.job_id), timeout=10).job
                for j in (steady, paused)]
        runs = stub.ListRuns(pb.ListRunsRequest(tenant=tenant, page_size=100), timeout=10).runs
        seen[:] = [f"jobs {[pb.JobStatus.Name(j.status) for j in jobs]}, runs "
                   f"{sorted(pb.RunStatus.Name(r.status) for r in runs)}"]
        return (all(j.status == pb.JOB_STATUS_COMPLETED for j in jobs)
                and all(r.status in TERMINAL for r in runs))

    try:
        wait_for(all_ended, 90, "every fire time of the tenant's jobs fired and ended")
    except TimedOut as exc:
        raise AssertionError(f"{exc}; last seen: {seen}") from None
    window = ["--since", (began - timedelta(minutes=1)).isoformat(), "--settle", "1s"]
    done = verify(settings, "--tenant", tenant, *window, "--report", "-")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""  # no violation to report
    assert "holds: no violation" in done.stderr
    # Every fire time of the two every-second jobs (a job created after its start_at fires
    # from its creation on), fired or recorded missed, and the one-off's.
    fire_times = 1 + sum(int((end - j.next_fire_at.ToDatetime(tzinfo=UTC)).total_seconds()) + 1
                         for j in (steady, paused))
    assert "jobs 3," in done.stderr and "retries 1)" in done.stderr
    summary = done.stderr.split("fire times fired ")[1]
    fired = int(summary.split(",")[0])
    missed = int(summary.split("recorded missed ")[1].split(",")[0])
    assert fired + missed == fire_times, done.stderr

    # The state store's rows as the log implies; then one changed behind the owner's back
    # (the completed job's next fire time: nothing fires from it), then put back.
    assert verify(settings, "--tenant", tenant, *window, "--projections").returncode == 0
    with psycopg.connect(settings.postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET next_fire_at = %s WHERE job_id = %s",
                     (end + timedelta(days=1), steady.job_id))
        try:
            changed = verify(settings, "--tenant", tenant, *window, "--projections",
                             "--report", "-")
        finally:
            conn.execute("UPDATE jobs SET next_fire_at = NULL WHERE job_id = %s",
                         (steady.job_id,))
    assert changed.returncode == 1, changed.stdout + changed.stderr
    [row] = [json.loads(x) for x in changed.stdout.splitlines()]
    assert (row["check"], row["job_id"]) == ("projection_differs", steady.job_id)
    assert row["detail"].endswith(f"next_fire_at {(end + timedelta(days=1)).isoformat()} "
                                  "where the log gives None")
    # A run's rows deleted from the ClickHouse history behind the projector's back.
    from clickhouse_driver import Client

    history = Client(host=settings.clickhouse_host, port=settings.clickhouse_port,
                     user=settings.clickhouse_user, password=settings.clickhouse_password)
    run = stub.ListRuns(pb.ListRunsRequest(job_id=steady.job_id, page_size=1), timeout=10).runs[0]
    runs_table = f"{settings.clickhouse_database}.runs"
    history.execute(f"ALTER TABLE {runs_table} DELETE WHERE run_id = %(run_id)s",
                    {"run_id": run.run_id})
    # A mutation runs in the background (this ClickHouse has no mutations_sync).
    wait_for(lambda: history.execute(f"SELECT count() FROM {runs_table} WHERE run_id = "
                                     "%(run_id)s", {"run_id": run.run_id})[0][0] == 0, 60,
             "the run's rows deleted from the history")
    gone = verify(settings, "--tenant", tenant, *window, "--projections", "--report", "-")
    assert gone.returncode == 1, gone.stdout + gone.stderr
    [row] = [json.loads(x) for x in gone.stdout.splitlines()]
    assert (row["check"], row["job_id"], row["run_id"]) == (
        "projection_differs", steady.job_id, run.run_id)
    assert row["detail"] == "the run history has no row of the run"
    assert row["fire_time"] == run.scheduled_at.ToDatetime(tzinfo=UTC).isoformat()

    # What if the steady job had fired every other second: its odd seconds go, none come.
    changes = service.log_dir / "every-other-second.json"
    changes.write_text(json.dumps({"cron": "*/2 * * * * *"}))
    what_if = subprocess.run(
        [sys.executable, "-m", "cronlog.infra.entrypoints.cli", "what-if", steady.job_id,
         "--spec", str(changes), "--since", window[1], "--json"], capture_output=True,
        text=True, timeout=120, env={**os.environ, **settings_env(settings)})
    assert what_if.returncode == 0, what_if.stderr
    answer = json.loads(what_if.stdout)
    current = [datetime.fromisoformat(t) for t in answer["current"]]
    assert len(current) == int((end - steady.next_fire_at.ToDatetime(tzinfo=UTC))
                               .total_seconds()) + 1
    assert answer["added"] == []
    assert answer["removed"] == [t.isoformat() for t in current if t.second % 2]
    assert [datetime.fromisoformat(t) for t in answer["proposed"]] == [
        t for t in current if not t.second % 2]

    # The same through the api, as the tenant would ask: VerifyHistory proves what verify
    # proved, `cronlog history verify` says so; WhatIf answers as what-if did.
    since = pb.VerifyHistoryRequest().since
    since.FromDatetime(began - timedelta(minutes=1))
    settle = pb.VerifyHistoryRequest().settle
    settle.FromTimedelta(timedelta(seconds=1))
    proved = stub.VerifyHistory(pb.VerifyHistoryRequest(tenant=tenant, since=since,
                                                        settle=settle), timeout=60)
    assert proved.holds and proved.violations_total == 0
    assert (proved.tally.jobs, proved.tally.fire_times, proved.tally.missed_fire_times,
            proved.tally.retries) == (3, fired, missed, 1)
    assert {c.check for c in proved.checks} >= {"fire_time_doubled", "fire_time_skipped"}
    # A proof costs a tenant's read burst: the next one within 5 s is refused, saying when.
    def history_verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cronlog.infra.entrypoints.cli", "history", "verify",
             "--tenant", tenant, "--since", window[1], "--job", steady.job_id,
             "--address", service.address], capture_output=True, text=True, timeout=120)

    cli = history_verify()
    if cli.returncode != 0:
        assert "RESOURCE_EXHAUSTED" in cli.stderr and "retry after" in cli.stderr, cli.stderr
        cli = wait_for(lambda: (lambda done: done if done.returncode == 0 else None)(
            history_verify()), 60, "history verify once the tenant's reads refilled")
    assert json.loads(cli.stdout)["holds"] is True
    every_other = pb.JobSpec()
    every_other.CopyFrom(stub.GetJob(pb.GetJobRequest(job_id=steady.job_id), timeout=10)
                         .job.spec)
    every_other.cron = "*/2 * * * * *"

    def what_if_reply() -> pb.WhatIfResponse | None:
        try:
            return stub.WhatIf(pb.WhatIfRequest(job_id=steady.job_id, spec=every_other,
                                                since=since), timeout=60)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
            return None

    replayed = wait_for(what_if_reply, 60, "WhatIf once the tenant's reads refilled")
    assert replayed.current_count == len(current) and replayed.added_count == 0
    assert [t.ToDatetime(tzinfo=UTC) for t in replayed.removed] == [
        t for t in current if t.second % 2]

    copy, doubled = copy_with_one_doubled(settings, {steady.job_id, paused.job_id})
    found = verify(copy, "--tenant", tenant, *window, "--report", "-")
    assert found.returncode == 1, found.stdout + found.stderr
    assert "VIOLATED" in found.stderr and "fire_time_doubled" in found.stderr
    [line] = [json.loads(x) for x in found.stdout.splitlines()]
    assert line["check"] == "fire_time_doubled"
    assert line["job_id"] == str(doubled["job_id"])
    assert line["fire_time"] == doubled["scheduled_at"].isoformat()
    assert line["run_id"] == str(doubled["run_id"])
    assert [e["event"] for e in line["events"]] == ["JobFireAdvanced", "RunScheduled",
                                                    "RunScheduled"]


def test_verify_refuses_a_bad_window(service: RunningService) -> None:
    settings = service.settings
    assert isinstance(settings, Settings)
    done = verify(settings, "--since", "2026-01-01T00:00:00", "--settle", "1s")
    assert done.returncode == 2
    assert "--since: '2026-01-01T00:00:00' needs an offset" in done.stderr
    done = verify(settings, "--since", "2026-01-01T00:00:00+00:00",
                  "--until", "2026-06-01T00:00:00+00:00")
    assert done.returncode == 2
    assert "--since: a window of at most 92 days (verify it in parts)" in done.stderr
