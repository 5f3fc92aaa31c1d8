"""The Python client (cronlog.client) drives every RPC of the api over the real stack, and
a refusal reaches its caller as ApiError with the field the api named (issue 36 item 5)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import grpc
import pytest

from cronlog.client import ApiError, CronlogClient
from cronlog.v1 import job_service_pb2 as pb
from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
RPCS = {m.name for m in pb.DESCRIPTOR.services_by_name["JobService"].methods}


class Recording:
    """The client's stub, noting which RPCs the client made."""

    def __init__(self, stub: Any) -> None:
        self._stub = stub
        self.made: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.made.add(name)
        return getattr(self._stub, name)


def test_the_client_drives_every_rpc(service: RunningService) -> None:
    client = CronlogClient(service.channel)
    recording = Recording(client._stub)
    client._stub = recording  # type: ignore[assignment]
    tenant = "t-" + uuid.uuid4().hex[:6]

    calendar = client.create_calendar(tenant, "holidays", exclusions=["2031-12-25"])
    calendar = client.update_calendar(tenant, "holidays", description="ours",
                                      exclusions=["2031-12-25", "2031-12-26"],
                                      expected_version=calendar.version)
    assert client.get_calendar(tenant, "holidays").description == "ours"
    assert [c.name for c in client.all_calendars(tenant)] == ["holidays"]

    # Alert channels (issue 37): the secret in the create's and the rotation's answers only.
    created = client.create_channel(tenant, "ops", kind="webhook",
                                    url="https://hooks.example.com/ops", is_default=True)
    assert created.signing_secret.startswith("whsec_") and created.channel.is_default
    rotated = client.rotate_channel_secret(tenant, "ops")
    assert rotated.channel.secret_rotation == 1
    assert rotated.signing_secret not in ("", created.signing_secret)
    channel = client.update_channel(tenant, "ops", url="https://hooks.example.com/v2",
                                    description="on call",
                                    expected_version=rotated.channel.version)
    assert client.get_channel(tenant, "ops").url == "https://hooks.example.com/v2"
    assert [c.name for c in client.all_channels(tenant)] == ["ops"]
    assert client.delete_channel(tenant, "ops").version == channel.version + 1
    assert list(client.all_channels(tenant)) == []
    # TestChannel: the shared service has no SMTP server, so the test fails at once.
    client.create_channel(tenant, "mail", kind="email", recipients=["ops@example.com"])
    tested = client.test_channel(tenant, "mail")
    assert not tested.delivered and "CRONLOG_SMTP_HOST" in tested.error and tested.delivery_id
    client.delete_channel(tenant, "mail")

    preview = client.preview_schedule(pb.PreviewScheduleRequest(cron="0 9 * * 1-5",
                                                                time_zone="Europe/Berlin",
                                                                count=3))
    assert len(preview.fire_times) == 3

    spec = pb.JobSpec(name="minutely", tenant=tenant, handler="echo", payload=b"v1",
                      cron="* * * * *", calendar="holidays")
    answer = client.create_job_answer(spec)
    job = answer.job
    assert job.version == 1 and list(answer.warnings) == [], "the echo handler is served"
    assert client.get_job(job.job_id).spec.calendar == "holidays"
    spec.payload = b"v2"
    job = client.update_job(job.job_id, spec, expected_version=job.version)
    assert job.spec.payload == b"v2"
    with pytest.raises(ApiError) as stale:
        client.update_job(job.job_id, spec, expected_version=job.version + 7)
    assert stale.value.code == grpc.StatusCode.FAILED_PRECONDITION
    bad = pb.JobSpec(name="bad", tenant=tenant, handler="echo", cron="61 * * * *")
    with pytest.raises(ApiError) as refused:
        client.create_job(bad)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.field.startswith("spec.")

    batch = [pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=pb.JobSpec(
        name=f"batch-{i}", tenant=tenant, handler="echo", cron="0 0 1 1 *")) for i in range(3)]
    results = client.create_jobs(batch)
    assert [r.WhichOneof("outcome") for r in results] == ["job"] * 3
    # The probe answers False or the jobs; wait_for hands back only a truthy answer.
    listed = cast("list[pb.Job]", wait_for(lambda: (jobs := list(client.all_jobs(pb.ListJobsRequest(
        tenant=tenant, page_size=2)))) and len(jobs) == 4 and jobs, 30, "four jobs listed"))
    assert {j.spec.name for j in listed} == {"minutely", "batch-0", "batch-1", "batch-2"}

    now = datetime.now(UTC)
    backfilled = client.backfill_job(job.job_id, now - timedelta(minutes=5),
                                     now - timedelta(minutes=2))
    assert len(backfilled) == 3
    assert client.pause_job(job.job_id).status == pb.JOB_STATUS_PAUSED
    assert client.resume_job(job.job_id).status == pb.JOB_STATUS_ACTIVE

    long_job = client.create_job(pb.JobSpec(name="long", tenant=tenant, handler="sleep",
                                            payload=json.dumps({"seconds": 240}).encode(),
                                            cron="0 0 1 1 *"))
    run = client.trigger_job(long_job.job_id)

    def running() -> bool:
        try:
            return client.get_run(run.run_id).status == pb.RUN_STATUS_RUNNING
        except ApiError as exc:  # NOT_FOUND until the history has it
            assert exc.code == grpc.StatusCode.NOT_FOUND, exc
            return False

    wait_for(running, 30, "the long run started")
    assert client.cancel_run(run.run_id).status == pb.RUN_STATUS_CANCELLED
    with pytest.raises(ApiError) as not_dead:
        client.redrive_run(run.run_id)
    assert not_dead.value.code == grpc.StatusCode.FAILED_PRECONDITION, "only dead letters"
    # The tenant has no dead letters: nothing is re-driven, nothing is left.
    none = client.redrive_dead_letters(now - timedelta(days=1), tenant=tenant, limit=10)
    assert list(none.runs) == [] and not none.more
    # No alert of the tenant was delivered: no attempt is listed.
    assert list(client.list_alert_deliveries(tenant, job_id=job.job_id).items) == []
    runs = cast("list[pb.Run]", wait_for(lambda: (found := list(client.all_runs(pb.ListRunsRequest(
        job_id=job.job_id, page_size=2)))) and len(found) >= 3 and found, 30,
        "the backfilled runs listed"))
    assert set(backfilled) <= {r.run_id for r in runs}

    workers = client.list_workers()
    assert any("echo" in w.handlers for w in workers)
    assert client.delete_job(long_job.job_id).status == pb.JOB_STATUS_DELETED
    proved = client.verify_history(now - timedelta(minutes=10), tenant=tenant,
                                   job_ids=[job.job_id])
    assert proved.tally.jobs == 1
    def what_if() -> pb.WhatIfResponse | None:
        # A proof costs the tenant's read burst: the next waits for it to refill.
        try:
            return client.what_if(job.job_id, job.spec, now - timedelta(minutes=10))
        except ApiError as exc:
            assert exc.code == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
            return None

    replayed = wait_for(what_if, 60, "WhatIf once the tenant's reads refilled")
    assert replayed.added_count == replayed.removed_count == 0, "the same spec changes nothing"
    back = client.restore_job(long_job.job_id, 1, skip_missed=True)
    assert back.job.status == pb.JOB_STATUS_ACTIVE and back.job.spec.name == "long"
    assert recording.made >= RPCS, f"not made: {sorted(RPCS - recording.made)}"
