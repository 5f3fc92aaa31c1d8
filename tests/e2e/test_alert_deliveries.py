"""The record of alert deliveries over the real stack (issue 37, docs/alerts.md "What was
delivered"): attempts recorded through KafkaDeliveryLog on the service's
`<prefix>alert-deliveries` reach ClickHouse through the history projector and read back
through ListAlertDeliveries, newest first, a page at a time, filtered by job, channel and
outcome, each attempt once though recorded twice; another tenant sees none of them; bad
input names its field; `cronlog alerts list` prints them as JSON and as a table. The
notifier itself is not needed: these are the records it writes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import cast

import grpc
import pytest

from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.notifier.kafka_delivery_log import KafkaDeliveryLog
from cronlog.notifications.model import AttemptOutcome, AttemptRecord
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.e2e.test_redrive import cronlog
from tests.support.delivery_records import attempt_record
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e


def recorded(service: RunningService, tenant: str) -> tuple[list[AttemptRecord], uuid.UUID]:
    """Five attempts of the tenant's alerts, a second apart, written as the notifier writes
    them (the second one twice): two deliveries to ops-hook of one job (retrying, then
    delivered), one failed to team-mail of the same job, two delivered of another job."""
    settings = service.settings
    assert isinstance(settings, Settings)
    job, other_job = uuid.uuid4(), uuid.uuid4()
    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    records = [
        attempt_record(tenant, n=0, outcome=AttemptOutcome.RETRYING, sent_at=t0, job_id=job),
        attempt_record(tenant, n=0, attempt=2, sent_at=t0 + timedelta(seconds=1), job_id=job),
        attempt_record(tenant, n=1, to="mail", outcome=AttemptOutcome.FAILED,
                       sent_at=t0 + timedelta(seconds=2), job_id=job, channel_name="team-mail"),
        attempt_record(tenant, n=2, sent_at=t0 + timedelta(seconds=3), job_id=other_job),
        attempt_record(tenant, n=3, sent_at=t0 + timedelta(seconds=4), job_id=other_job),
    ]
    log = KafkaDeliveryLog(settings, AvroCodec())
    log.record(records)
    log.record(records[1:2])  # again: a notifier that restarted before it committed
    return records, job


def listed(stub: pb_grpc.JobServiceStub, **fields: object) -> pb.ListAlertDeliveriesResponse:
    return stub.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(**fields), timeout=30)  # type: ignore[arg-type]


def test_recorded_attempts_are_listed_per_tenant_paged_and_filtered(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant, other = "ad-" + uuid.uuid4().hex[:6], "ad-" + uuid.uuid4().hex[:6]
    records, job = recorded(service, tenant)
    # The probe answers False or the attempts; wait_for hands back only a truthy answer.
    everything = cast("Sequence[pb.AlertDeliveryAttempt]", wait_for(
        lambda: (a := listed(stub, tenant=tenant, page_size=100).attempts) and len(a) >= 5
        and a, 90, "the five attempts listed through ListAlertDeliveries"))
    assert len(everything) == 5, "the attempt recorded twice is listed once"
    # Newest first.
    assert [a.sent_at.ToDatetime(tzinfo=UTC) for a in everything] == [
        r.sent_at for r in reversed(records)]
    retrying = everything[-1]
    assert (retrying.outcome, retrying.status_code, retrying.attempt, retrying.error,
            retrying.channel_name, retrying.tenant, retrying.job_id) == (
        "retrying", 503, 1, "HTTP 503", "ops-hook", tenant, str(job))
    assert retrying.next_attempt_at.ToDatetime(tzinfo=UTC) == records[0].next_attempt_at
    assert retrying.delivery_id == everything[-2].delivery_id, "one delivery, two attempts"

    # Pages of two, then one: each attempt once, in the same order.
    paged: list[pb.AlertDeliveryAttempt] = []
    token = ""
    for _ in range(5):
        page = listed(stub, tenant=tenant, page_size=2, page_token=token)
        paged += page.attempts
        token = page.next_page_token
        if not token:
            break
    assert [(a.delivery_id, a.attempt) for a in paged] == [
        (a.delivery_id, a.attempt) for a in everything]

    of_job = listed(stub, tenant=tenant, job_id=str(job)).attempts
    assert len(of_job) == 3 and {a.job_id for a in of_job} == {str(job)}
    assert [a.channel_name for a in listed(stub, tenant=tenant, channel="team-mail").attempts
            ] == ["team-mail"]
    assert [a.outcome for a in listed(stub, tenant=tenant, outcome="failed").attempts
            ] == ["failed"]

    # Another tenant sees none of them, whatever it filters on.
    assert list(listed(stub, tenant=other).attempts) == []
    assert list(listed(stub, tenant=other, job_id=str(job)).attempts) == []


@pytest.mark.parametrize(("fields", "field"), [
    ({"tenant": "acme", "job_id": "nope"}, "job_id"),
    ({"tenant": "acme", "outcome": "exploded"}, "outcome"),
    ({"tenant": "acme", "page_size": 101}, "page_size"),
    ({"tenant": "acme", "page_token": "not-a-token"}, "page_token"),
    ({}, "tenant"),
])
def test_bad_input_names_its_field(service: RunningService, fields: dict[str, object],
                                   field: str) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    with pytest.raises(grpc.RpcError) as refused:
        listed(stub, **fields)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailers = dict(cast("tuple[tuple[str, str], ...]", refused.value.trailing_metadata() or ()))
    assert trailers.get("cronlog-field") == field


def test_the_cli_lists_them_as_json_and_as_a_table(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "ad-" + uuid.uuid4().hex[:6]
    _, job = recorded(service, tenant)
    wait_for(lambda: len(listed(stub, tenant=tenant, page_size=100).attempts) >= 5, 90,
             "the attempts listed")
    out = cronlog(service, "alerts", "list", "--tenant", tenant, "--job", str(job),
                  "--outcome", "failed")
    assert out.returncode == 0, out.stderr
    [failed] = json.loads(out.stdout)["attempts"]
    assert (failed["channel_name"], failed["outcome"], failed["status_code"]) == (
        "team-mail", "failed", 410)
    table = cronlog(service, "-o", "table", "alerts", "list", "--tenant", tenant,
                    "--page-size", "2")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:2] == ["SENT", "JOB"] and len(lines[1:3]) == 2
    assert "next page: --page-token" in table.stdout
    bad = cronlog(service, "alerts", "list", "--tenant", tenant, "--page-size", "500")
    assert bad.returncode == 1 and "page_size" in bad.stderr
