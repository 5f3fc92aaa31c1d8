"""Tenancy of the record of alert deliveries (issue 37), a test of tests/e2e/test_tenancy.py
kept here (that module is long): it runs there, on its service with two tenants' tokens."""

from __future__ import annotations

import uuid

import grpc

from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.notifier.kafka_delivery_log import KafkaDeliveryLog
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.support.delivery_records import attempt_record
from tests.support.polling import wait_for


def test_alert_deliveries_are_only_the_callers_tenants(service: RunningService) -> None:
    """A tenant lists its own delivery attempts, with or without naming itself; another
    tenant naming it is PERMISSION_DENIED, and its own list holds none of them, even when it
    filters on the first tenant's job. More in tests/e2e/test_alert_deliveries.py."""
    from tests.e2e.test_tenancy import ALPHA, A, B, code_of

    settings = service.settings
    assert isinstance(settings, Settings)
    stub = pb_grpc.JobServiceStub(service.channel)
    job = uuid.uuid4()
    KafkaDeliveryLog(settings, AvroCodec()).record([attempt_record(ALPHA, job_id=job)])

    def alphas_own() -> list[pb.AlertDeliveryAttempt]:
        return [a for a in stub.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(
            job_id=str(job)), timeout=30, metadata=A).attempts]

    [attempt] = wait_for(alphas_own, 90, "alpha's delivery attempt listed")
    assert attempt.tenant == ALPHA
    assert len(stub.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(
        tenant=ALPHA, job_id=str(job)), timeout=30, metadata=A).attempts) == 1
    assert code_of(lambda: stub.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(
        tenant=ALPHA), timeout=30, metadata=B)) == grpc.StatusCode.PERMISSION_DENIED
    assert list(stub.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(
        job_id=str(job)), timeout=30, metadata=B).attempts) == []
