"""Per-tenant tokens against the real service: every JobService RPC needs a known token, and
tenant beta can neither see nor change tenant alpha's jobs and runs through any of them."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, free_port, rid, start_service, stop_service
from tests.e2e.tenancy_channels import test_channels_are_only_the_callers_tenants  # noqa: F401
from tests.e2e.tenancy_deliveries import (  # noqa: F401
    test_alert_deliveries_are_only_the_callers_tenants,
)
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

ALPHA, BETA = "alpha", "beta"
ALPHA_TOKEN = "alpha-" + uuid.uuid4().hex
BETA_TOKEN = "beta-" + uuid.uuid4().hex
A = (("authorization", f"Bearer {ALPHA_TOKEN}"),)
B = (("authorization", f"Bearer {BETA_TOKEN}"),)
SERVICE = pb.DESCRIPTOR.services_by_name["JobService"]
# What each RPC is checked by below; test_every_rpc_is_covered keeps it complete.
# test_channels_are_only_the_callers_tenants is kept in tests/e2e/tenancy_channels.py and
# imported above, so it is collected and run here, on this module's service.
COVERAGE = {
    "CreateJob": "test_create_job_only_for_the_callers_tenant",
    "CreateJobs": "test_a_batch_creates_only_the_callers_jobs",
    "GetJob": "test_reads_see_only_the_callers_jobs_and_runs",
    "ListJobs": "test_reads_see_only_the_callers_jobs_and_runs",
    "GetRun": "test_reads_see_only_the_callers_jobs_and_runs",
    "ListRuns": "test_reads_see_only_the_callers_jobs_and_runs",
    "UpdateJob": "test_another_tenants_job_and_run_cannot_be_changed",
    "PauseJob": "test_another_tenants_job_and_run_cannot_be_changed",
    "ResumeJob": "test_another_tenants_job_and_run_cannot_be_changed",
    "DeleteJob": "test_another_tenants_job_and_run_cannot_be_changed",
    "TriggerJob": "test_another_tenants_job_and_run_cannot_be_changed",
    "BackfillJob": "test_another_tenants_job_and_run_cannot_be_changed",
    "CancelRun": "test_another_tenants_job_and_run_cannot_be_changed",
    "RedriveRun": "test_another_tenants_job_and_run_cannot_be_changed",
    "RedriveDeadLetters": "test_another_tenants_job_and_run_cannot_be_changed",
    "RestoreJob": "test_another_tenants_job_and_run_cannot_be_changed",
    "VerifyHistory": "test_another_tenants_job_and_run_cannot_be_changed",
    "WhatIf": "test_another_tenants_job_and_run_cannot_be_changed",
    "PreviewSchedule": "test_preview_schedule_needs_only_a_token",
    "CreateCalendar": "test_calendars_are_only_the_callers_tenants",
    "UpdateCalendar": "test_calendars_are_only_the_callers_tenants",
    "GetCalendar": "test_calendars_are_only_the_callers_tenants",
    "ListCalendars": "test_calendars_are_only_the_callers_tenants",
    "ListWorkers": "test_a_tenant_sees_the_workers_it_may_use_and_no_host",
    "CreateChannel": "test_channels_are_only_the_callers_tenants",
    "UpdateChannel": "test_channels_are_only_the_callers_tenants",
    "DeleteChannel": "test_channels_are_only_the_callers_tenants",
    "GetChannel": "test_channels_are_only_the_callers_tenants",
    "ListChannels": "test_channels_are_only_the_callers_tenants",
    "RotateChannelSecret": "test_channels_are_only_the_callers_tenants",
    "ListAlertDeliveries": "test_alert_deliveries_are_only_the_callers_tenants",
    "TestChannel": "test_channels_are_only_the_callers_tenants",
}


def code_of(call: Callable[[], object]) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def past_the_budget(call: Callable[[], object]) -> object:
    """The call once the tenant's read budget lets it through: a proof from the log costs a
    tenant's whole read burst (docs/verify.md), which the calls before it may have spent."""
    def attempt() -> tuple[object] | None:
        try:
            return (call(),)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            return None

    return wait_for(attempt, 30, "the tenant's reads refilled")[0]


def rejection(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value


def field_of(error: grpc.RpcError) -> str | None:
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailing = cast("tuple[tuple[str, str], ...]", error.trailing_metadata() or ())
    return dict(trailing).get("cronlog-field")


@pytest.fixture(scope="module")
def service(stack_settings: object, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[RunningService]:
    # alpha's token comes from a file and beta's from the list, so both sources are used.
    tokens = tmp_path_factory.mktemp("tenancy") / "tokens"
    tokens.write_text(f"# tenant token\n{ALPHA} {ALPHA_TOKEN}\n")
    running = start_service(stack_settings, "test_tenancy", extra_env={
        "CRONLOG_TENANT_TOKENS_FILE": str(tokens),
        "CRONLOG_TENANT_TOKENS": f"{BETA}={BETA_TOKEN}"})
    try:
        yield running
    finally:
        stop_service(running)


def create_with_run(stub: pb_grpc.JobServiceStub, tenant: str,
                    metadata: tuple[tuple[str, str], ...]) -> tuple[pb.Job, str]:
    """A job that does not fire on its own in the test's time, with one finished manual run."""
    spec = pb.JobSpec(name=f"{tenant}-job", tenant=tenant, handler="echo", cron="0 0 1 1 *")
    job = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30,
                         metadata=metadata).job
    run = stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job.job_id),
                          timeout=30, metadata=metadata).run

    def succeeded() -> bool:
        try:
            found = stub.GetRun(pb.GetRunRequest(run_id=run.run_id), timeout=10,
                                metadata=metadata).run
        except grpc.RpcError:
            return False
        return found.status == pb.RUN_STATUS_SUCCEEDED

    wait_for(succeeded, 30, f"{tenant}'s manual run succeeding")
    return job, run.run_id


@pytest.fixture(scope="module")
def alpha(stub: pb_grpc.JobServiceStub) -> tuple[pb.Job, str]:
    return create_with_run(stub, ALPHA, A)


@pytest.fixture(scope="module")
def beta(stub: pb_grpc.JobServiceStub) -> tuple[pb.Job, str]:
    return create_with_run(stub, BETA, B)


def test_every_rpc_is_covered() -> None:
    assert set(COVERAGE) == set(SERVICE.methods_by_name)
    assert all(name in globals() for name in COVERAGE.values())


@pytest.mark.parametrize("rpc", sorted(SERVICE.methods_by_name))
def test_every_rpc_needs_a_known_bearer_token(service: RunningService, rpc: str) -> None:
    request_type: Any = getattr(pb, SERVICE.methods_by_name[rpc].input_type.name)
    call = service.channel.unary_unary(f"/{SERVICE.full_name}/{rpc}",
                                       request_serializer=request_type.SerializeToString,
                                       response_deserializer=lambda b: b)
    for metadata in (None, (("authorization", "Bearer wrong-" + BETA_TOKEN),),
                     (("authorization", BETA_TOKEN),),
                     (("authorization", f"Basic {BETA_TOKEN}"),)):
        # A lambda that binds by a default is beyond mypy (python/mypy#15459).
        error = rejection(lambda m=metadata: call(  # type: ignore[misc]
            request_type(), timeout=10, metadata=m))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, (rpc, metadata)
    # The same empty request with a valid token gets past authentication (then fails or
    # not on its own merits), so the rejections above are the token's doing.
    assert code_of(lambda: call(request_type(), timeout=10, metadata=B)) not in (
        grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


def test_health_and_reflection_answer_without_a_token(service: RunningService) -> None:
    health = health_pb2_grpc.HealthStub(service.channel)
    for name in ("", SERVICE.full_name):
        reply = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(service.channel)
    # What `grpcurl list` and `grpcurl describe` ask.
    answers = list(reflection.ServerReflectionInfo(iter([
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE.full_name),
    ]), timeout=10))
    listed = {s.name for s in answers[0].list_services_response.service}
    assert SERVICE.full_name in listed and "grpc.health.v1.Health" in listed
    assert answers[1].file_descriptor_response.file_descriptor_proto


def test_create_job_only_for_the_callers_tenant(stub: pb_grpc.JobServiceStub) -> None:
    spec = pb.JobSpec(name="planted", tenant=ALPHA, handler="echo", cron="0 0 1 1 *")
    planted = rejection(lambda: stub.CreateJob(
        pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30, metadata=B))
    assert planted.code() == grpc.StatusCode.PERMISSION_DENIED
    assert field_of(planted) == "spec.tenant"
    listed = stub.ListJobs(pb.ListJobsRequest(page_size=1000), timeout=10, metadata=A).jobs
    assert "planted" not in {j.spec.name for j in listed}

    spec.tenant = ""
    own = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30,
                         metadata=B).job
    assert own.spec.tenant == BETA, "an empty tenant is the caller's"


def test_a_batch_creates_only_the_callers_jobs(stub: pb_grpc.JobServiceStub) -> None:
    """CreateJobs checks every item's tenant as CreateJob does: beta's token cannot plant a
    job in alpha's tenant inside a batch, and the item refused fails alone."""
    name = "batch-planted-" + rid()
    items = [pb.CreateJobRequest(request_id=rid(), spec=pb.JobSpec(
                 name=name, tenant=tenant, handler="echo", cron="0 0 1 1 *"))
             for tenant in (BETA, ALPHA, "")]
    results = stub.CreateJobs(pb.CreateJobsRequest(items=items), timeout=30,
                              metadata=B).results
    assert [r.WhichOneof("outcome") for r in results] == ["job", "error", "job"]
    assert results[1].error.code == "PERMISSION_DENIED"
    assert results[1].error.field == "items[1].spec.tenant"
    for result in (results[0], results[2]):
        job = wait_for(partial(_visible, stub, result.job.job_id, B), 30, "batch job")
        assert job.spec.tenant == BETA, "an empty tenant is the caller's"
    listed = stub.ListJobs(pb.ListJobsRequest(page_size=1000), timeout=10, metadata=A).jobs
    assert name not in {j.spec.name for j in listed}


def _visible(stub: pb_grpc.JobServiceStub, job_id: str,
             metadata: tuple[tuple[str, str], ...]) -> pb.Job | None:
    try:
        return stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10, metadata=metadata).job
    except grpc.RpcError:
        return None


def test_reads_see_only_the_callers_jobs_and_runs(
        stub: pb_grpc.JobServiceStub, alpha: tuple[pb.Job, str],
        beta: tuple[pb.Job, str]) -> None:
    alpha_job, alpha_run = alpha
    beta_job, beta_run = beta

    assert stub.GetJob(pb.GetJobRequest(job_id=alpha_job.job_id), timeout=10,
                       metadata=A).job.job_id == alpha_job.job_id
    hidden = rejection(lambda: stub.GetJob(pb.GetJobRequest(job_id=alpha_job.job_id),
                                           timeout=10, metadata=B))
    unknown_id = str(uuid.uuid4())
    unknown = rejection(lambda: stub.GetJob(pb.GetJobRequest(job_id=unknown_id), timeout=10,
                                            metadata=B))
    # Another tenant's job reads exactly like one that does not exist.
    assert hidden.code() == unknown.code() == grpc.StatusCode.NOT_FOUND
    # grpc gives every failed call its details; the stubs say Optional.
    assert (cast(str, hidden.details()).replace(alpha_job.job_id, "ID")
            == cast(str, unknown.details()).replace(unknown_id, "ID"))

    def job_ids(metadata: tuple[tuple[str, str], ...], tenant: str = "") -> set[str]:
        return {j.job_id for j in stub.ListJobs(pb.ListJobsRequest(tenant=tenant, page_size=1000),
                                                timeout=10, metadata=metadata).jobs}

    assert alpha_job.job_id in job_ids(A) and beta_job.job_id not in job_ids(A)
    assert beta_job.job_id in job_ids(B) and alpha_job.job_id not in job_ids(B)
    assert job_ids(B, BETA) == job_ids(B)
    other = rejection(lambda: job_ids(B, ALPHA))
    assert other.code() == grpc.StatusCode.PERMISSION_DENIED
    assert field_of(other) == "tenant"

    assert stub.GetRun(pb.GetRunRequest(run_id=alpha_run), timeout=10,
                       metadata=A).run.tenant == ALPHA
    hidden_run = rejection(lambda: stub.GetRun(pb.GetRunRequest(run_id=alpha_run), timeout=10,
                                               metadata=B))
    unknown_run = rejection(lambda: stub.GetRun(pb.GetRunRequest(run_id=unknown_id), timeout=10,
                                                metadata=B))
    assert hidden_run.code() == unknown_run.code() == grpc.StatusCode.NOT_FOUND
    assert (cast(str, hidden_run.details()).replace(alpha_run, "ID")
            == cast(str, unknown_run.details()).replace(unknown_id, "ID"))
    assert rejection(lambda: stub.GetRun(pb.GetRunRequest(run_id=beta_run), timeout=10,
                                         metadata=A)).code() == grpc.StatusCode.NOT_FOUND

    def run_ids(metadata: tuple[tuple[str, str], ...], **filters: Any) -> set[str]:
        return {r.run_id for r in stub.ListRuns(pb.ListRunsRequest(page_size=1000, **filters),
                                                timeout=10, metadata=metadata).runs}

    assert run_ids(A, job_id=alpha_job.job_id) == {alpha_run}
    assert run_ids(B, job_id=alpha_job.job_id) == set()
    assert alpha_run in run_ids(A) and beta_run not in run_ids(A)
    assert beta_run in run_ids(B) and alpha_run not in run_ids(B)
    denied = rejection(lambda: run_ids(B, tenant=ALPHA))
    assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
    assert field_of(denied) == "tenant"


def test_another_tenants_job_and_run_cannot_be_changed(
        stub: pb_grpc.JobServiceStub, alpha: tuple[pb.Job, str]) -> None:
    job, run_id = alpha
    before = stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10, metadata=A).job
    runs_before = {r.run_id for r in stub.ListRuns(
        pb.ListRunsRequest(job_id=job.job_id, page_size=1000), timeout=10, metadata=A).runs}
    spec = pb.JobSpec()
    spec.CopyFrom(before.spec)
    spec.payload = b"changed by beta"
    now = datetime.now(UTC)
    backfill = pb.BackfillJobRequest(request_id=rid(), job_id=job.job_id)
    getattr(backfill, "from").FromDatetime(now - timedelta(hours=1))
    backfill.until.FromDatetime(now)
    dead_letters = pb.RedriveDeadLettersRequest(request_id=rid(), job_id=job.job_id)
    dead_letters.since.FromDatetime(now - timedelta(days=1))
    proof = pb.VerifyHistoryRequest(job_ids=[job.job_id])
    proof.since.FromDatetime(now - timedelta(hours=1))
    attempts: dict[str, Callable[[tuple[tuple[str, str], ...]], object]] = {
        "UpdateJob": lambda m: stub.UpdateJob(pb.UpdateJobRequest(
            request_id=rid(), job_id=job.job_id, spec=pb.JobSpec(
                name="x", tenant=BETA, handler="echo", cron="* * * * *")), timeout=30, metadata=m),
        "UpdateJob, tenant left empty": lambda m: stub.UpdateJob(pb.UpdateJobRequest(
            request_id=rid(), job_id=job.job_id, spec=pb.JobSpec(
                name="x", handler="echo", cron="* * * * *")), timeout=30, metadata=m),
        "PauseJob": lambda m: stub.PauseJob(pb.PauseJobRequest(
            request_id=rid(), job_id=job.job_id), timeout=30, metadata=m),
        "ResumeJob": lambda m: stub.ResumeJob(pb.ResumeJobRequest(
            request_id=rid(), job_id=job.job_id), timeout=30, metadata=m),
        "DeleteJob": lambda m: stub.DeleteJob(pb.DeleteJobRequest(
            request_id=rid(), job_id=job.job_id), timeout=30, metadata=m),
        "TriggerJob": lambda m: stub.TriggerJob(pb.TriggerJobRequest(
            request_id=rid(), job_id=job.job_id), timeout=30, metadata=m),
        "BackfillJob": lambda m: stub.BackfillJob(backfill, timeout=30, metadata=m),
        "CancelRun": lambda m: stub.CancelRun(pb.CancelRunRequest(
            request_id=rid(), run_id=run_id), timeout=30, metadata=m),
        "RedriveRun": lambda m: stub.RedriveRun(pb.RedriveRunRequest(
            request_id=rid(), run_id=run_id), timeout=30, metadata=m),
        "RedriveDeadLetters": lambda m: stub.RedriveDeadLetters(dead_letters, timeout=30,
                                                                metadata=m),
        "RestoreJob": lambda m: stub.RestoreJob(pb.RestoreJobRequest(
            request_id=rid(), job_id=job.job_id, version=1), timeout=30, metadata=m),
        "VerifyHistory": lambda m: past_the_budget(
            lambda: stub.VerifyHistory(proof, timeout=60, metadata=m)),
        "WhatIf": lambda m: past_the_budget(lambda: stub.WhatIf(pb.WhatIfRequest(
            job_id=job.job_id, since=proof.since, spec=pb.JobSpec(
                name="x", handler="echo", cron="* * * * *")), timeout=60, metadata=m)),
    }
    for name, attempt in attempts.items():
        assert code_of(lambda a=attempt: a(B)) == grpc.StatusCode.NOT_FOUND, name  # type: ignore[misc]

    # beta may not name alpha as the tenant either: refused from the request alone.
    planted = rejection(lambda: stub.UpdateJob(pb.UpdateJobRequest(
        request_id=rid(), job_id=job.job_id, spec=spec), timeout=30, metadata=B))
    assert planted.code() == grpc.StatusCode.PERMISSION_DENIED
    assert field_of(planted) == "spec.tenant"
    named = pb.RedriveDeadLettersRequest(request_id=rid(), tenant=ALPHA)
    named.since.CopyFrom(dead_letters.since)
    alphas = rejection(lambda: stub.RedriveDeadLetters(named, timeout=30, metadata=B))
    assert alphas.code() == grpc.StatusCode.PERMISSION_DENIED
    assert field_of(alphas) == "tenant"
    proof_of_alpha = pb.VerifyHistoryRequest(tenant=ALPHA, since=proof.since)
    alphas = rejection(lambda: past_the_budget(
        lambda: stub.VerifyHistory(proof_of_alpha, timeout=60, metadata=B)))
    assert alphas.code() == grpc.StatusCode.PERMISSION_DENIED
    assert field_of(alphas) == "tenant"
    # Nor may alpha hand its job to beta.
    spec.tenant = BETA
    handed = rejection(lambda: stub.UpdateJob(pb.UpdateJobRequest(
        request_id=rid(), job_id=job.job_id, spec=spec), timeout=30, metadata=A))
    assert handed.code() == grpc.StatusCode.PERMISSION_DENIED

    # None of beta's commands reached the owner: commands on one job are applied in order,
    # so alpha's pause, sent after them, is the job's next event, and alpha's manual run
    # is the only new run.
    paused = stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=job.job_id), timeout=30,
                           metadata=A).job
    assert paused.status == pb.JOB_STATUS_PAUSED
    assert paused.version == before.version + 1
    assert paused.spec.payload == before.spec.payload
    manual = stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30, metadata=A).run

    def runs_now() -> set[str] | None:
        ids = {r.run_id for r in stub.ListRuns(pb.ListRunsRequest(
            job_id=job.job_id, page_size=1000), timeout=10, metadata=A).runs}
        return ids if manual.run_id in ids else None

    assert wait_for(runs_now, 30, "alpha's manual run in history") == runs_before | {
        manual.run_id}
    # The same RPCs on alpha's own job and run get past scoping.
    for name in ("BackfillJob", "CancelRun", "RedriveRun", "RedriveDeadLetters", "RestoreJob",
                 "VerifyHistory", "WhatIf"):
        assert code_of(lambda n=name: attempts[n](A)) not in (  # type: ignore[misc]
            grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED), name


def test_preview_schedule_needs_only_a_token(stub: pb_grpc.JobServiceStub) -> None:
    request = pb.PreviewScheduleRequest(cron="0 * * * *", count=3)
    for metadata in (A, B):
        assert len(stub.PreviewSchedule(request, timeout=10, metadata=metadata).fire_times) == 3


def test_calendars_are_only_the_callers_tenants(stub: pb_grpc.JobServiceStub) -> None:
    """More in tests/e2e/test_calendars.py: beta cannot use alpha's calendar in a job."""
    name = "cal-" + uuid.uuid4().hex[:8]
    stub.CreateCalendar(pb.CreateCalendarRequest(request_id=rid(), name=name,
                                                 exclusions=["2030-01-01"]),
                        timeout=30, metadata=A)
    for call in (lambda: stub.CreateCalendar(pb.CreateCalendarRequest(
                     request_id=rid(), tenant=ALPHA, name="x"), timeout=30, metadata=B),
                 lambda: stub.ListCalendars(pb.ListCalendarsRequest(tenant=ALPHA),
                                            timeout=10, metadata=B)):
        assert code_of(call) == grpc.StatusCode.PERMISSION_DENIED
    assert code_of(lambda: stub.GetCalendar(pb.GetCalendarRequest(name=name), timeout=10,
                                            metadata=B)) == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: stub.UpdateCalendar(pb.UpdateCalendarRequest(
        request_id=rid(), name=name), timeout=30, metadata=B)) == grpc.StatusCode.NOT_FOUND
    assert name not in [c.name for c in stub.ListCalendars(
        pb.ListCalendarsRequest(), timeout=10, metadata=B).calendars]
    mine = stub.GetCalendar(pb.GetCalendarRequest(name=name), timeout=10, metadata=A).calendar
    assert (mine.tenant, mine.version, list(mine.exclusions)) == (ALPHA, 1, ["2030-01-01"])


def test_a_tenant_sees_the_workers_it_may_use_and_no_host(
        stub: pb_grpc.JobServiceStub) -> None:
    """docs/workers.md: workers are shared; a tenant learns what can run its jobs (the
    queues and handlers it may name), never where they run."""
    workers = wait_for(lambda: list(stub.ListWorkers(pb.ListWorkersRequest(), timeout=10,
                                                     metadata=B).workers), 40,
                       "the worker announced to beta")
    shared = {"echo", "sleep", "fail", "http"}  # CRONLOG_SHARED_HANDLERS' default
    for worker in workers:
        assert worker.host == "" and worker.worker_id
        assert worker.handlers and set(worker.handlers) <= shared, worker
        assert list(worker.queues) == ["default"]


def replies_topic_ready(bootstrap: str, topic: str) -> bool:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tenancy-probe"})
    try:
        partitions = consumer.list_topics(topic, timeout=5).topics[topic].partitions
        for p in partitions:
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)
        return bool(partitions)
    except KafkaException:
        return False
    finally:
        consumer.close()


def test_tls_with_tokens(stack_settings: object, tmp_path: Path) -> None:
    """The api alone, in this process, on a TLS port: a client trusting the certificate and
    holding a token is served; a plaintext client is not."""
    from cronlog.infra.composition import build_api
    from cronlog.infra.config import Settings
    from cronlog.infra.provision import provision
    from tests.conftest import make_isolated

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    settings = make_isolated(stack_settings)
    assert isinstance(settings, Settings)
    settings = settings.with_overrides(
        grpc_address=f"127.0.0.1:{free_port()}", tenant_tokens=((ALPHA, ALPHA_TOKEN),),
        tls_cert=str(cert), tls_key=str(key))
    provision(settings)
    # A topic just created may have no partition leader yet; the api expects one at start.
    wait_for(lambda: replies_topic_ready(settings.kafka_bootstrap, settings.replies_topic), 30,
             "leaders for the new replies topic")
    server = build_api(settings)
    try:
        server.start()
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(settings.grpc_address, credentials) as secure:
            tls_stub = pb_grpc.JobServiceStub(secure)
            assert tls_stub.ListJobs(pb.ListJobsRequest(), timeout=10, metadata=A).jobs == []
            assert code_of(lambda: tls_stub.ListJobs(pb.ListJobsRequest(), timeout=10)) == (
                grpc.StatusCode.UNAUTHENTICATED)
        with grpc.insecure_channel(settings.grpc_address) as plain:
            assert code_of(lambda: pb_grpc.JobServiceStub(plain).ListJobs(
                pb.ListJobsRequest(), timeout=5, metadata=A)) == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop()
