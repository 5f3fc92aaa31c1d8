"""ListAlertDeliveries at the gRPC edge (infra/grpc/alert_delivery_rpcs.py) and its charge:
each field out of bounds is INVALID_ARGUMENT naming it, before anything is read; the page is
always of the caller's tenant; rows become AlertDeliveryAttempts; the call is a read."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from cronlog.domain.errors import InvalidSpec
from cronlog.infra.grpc.alert_delivery_rpcs import (
    DEFAULT_PAGE,
    AlertDeliveryRpcs,
    attempt_out,
    delivery_query,
)
from cronlog.infra.grpc.tenant_budget import READ_RATE, Charge, charge_of
from cronlog.infra.notifier.kafka_delivery_log import attempt_record as fields
from cronlog.notifications.model import AttemptOutcome
from cronlog.projections.delivery_history import AlertDeliveryRow, DeliveryFilter, delivery_row
from cronlog.v1 import job_service_pb2 as pb
from tests.support.delivery_records import attempt_record

JOB = "11111111-2222-3333-4444-555555555555"


@pytest.mark.parametrize(("request_fields", "field"), [
    ({"job_id": "nope"}, "job_id"),
    ({"channel": "no spaces allowed"}, "channel"),
    ({"outcome": "exploded"}, "outcome"),
    ({"page_size": 101}, "page_size"),
    ({"page_size": -1}, "page_size"),
    ({"page_token": "x" * 513}, "page_token"),
])
def test_each_field_out_of_bounds_is_named(request_fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        delivery_query(pb.ListAlertDeliveriesRequest(**request_fields), "acme")
    assert refused.value.field == field


def test_the_request_becomes_a_page_of_the_tenant() -> None:
    where, size, token = delivery_query(pb.ListAlertDeliveriesRequest(
        tenant="ignored", job_id=JOB.upper(), channel="ops-hook", outcome="failed",
        page_size=7, page_token="abc"), "acme")
    assert where == DeliveryFilter("acme", JOB, "ops-hook", "failed")
    assert (size, token) == (7, "abc")
    assert delivery_query(pb.ListAlertDeliveriesRequest(), "acme") == (
        DeliveryFilter("acme"), DEFAULT_PAGE, None)


def test_a_row_is_answered_with_every_field() -> None:
    row = delivery_row(fields(attempt_record(outcome=AttemptOutcome.RETRYING, attempt=2)))
    out = attempt_out(row)
    assert (out.delivery_id, out.attempt, out.outcome, out.status_code, out.latency_ms,
            out.channel_name, out.channel_kind, out.kind, out.run_attempt) == (
        row.delivery_id, 2, "retrying", 503, 84, "ops-hook", "webhook", "dead_lettered", 3)
    assert out.sent_at.ToMicroseconds() == row.sent_at_us
    assert out.next_attempt_at.ToMicroseconds() == row.next_attempt_at_us
    delivered = attempt_out(delivery_row(fields(attempt_record())))
    assert not delivered.HasField("next_attempt_at")


class Aborted(Exception):
    pass


class Context:
    def __init__(self) -> None:
        self.trailers: Any = ()

    def set_trailing_metadata(self, trailers: Any) -> None:
        self.trailers = trailers

    def abort(self, code: grpc.StatusCode, message: str) -> None:
        raise Aborted(code, message)


class Reader:
    def __init__(self) -> None:
        self.asked: list[DeliveryFilter] = []

    def list_deliveries(self, where: DeliveryFilter, page_size: int, page_token: str | None
                        ) -> tuple[list[AlertDeliveryRow], str | None]:
        self.asked.append(where)
        return [delivery_row(fields(attempt_record()))], "next"


class Servicer(AlertDeliveryRpcs):
    def __init__(self, caller: str | None) -> None:
        self.caller = caller

    def _scope(self, context: Any, *, job_id: str | None = None, run_id: str | None = None,
               tenant: tuple[str, str] | None = None) -> str | None:
        if self.caller is not None and tenant is not None and tenant[1] not in ("", self.caller):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not the authenticated tenant")
        return self.caller


def test_the_page_is_always_the_callers_tenants() -> None:
    servicer, reader = Servicer("acme"), Reader()
    servicer.serve_alert_deliveries(reader)
    answer = servicer.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(), Context())  # type: ignore[arg-type]
    assert reader.asked == [DeliveryFilter("acme")]
    assert len(answer.attempts) == 1 and answer.next_page_token == "next"
    with pytest.raises(Aborted) as denied:
        servicer.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(tenant="globex"),
                                     Context())  # type: ignore[arg-type]
    assert denied.value.args[0] == grpc.StatusCode.PERMISSION_DENIED
    assert len(reader.asked) == 1, "nothing read for another tenant"


def test_an_open_api_needs_the_tenant_and_bad_input_reads_nothing() -> None:
    servicer, reader = Servicer(None), Reader()
    servicer.serve_alert_deliveries(reader)
    context = Context()
    with pytest.raises(Aborted) as refused:
        servicer.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(), context)  # type: ignore[arg-type]
    assert refused.value.args[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert context.trailers == (("cronlog-field", "tenant"),)
    with pytest.raises(Aborted):
        servicer.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(
            tenant="acme", outcome="nope"), Context())  # type: ignore[arg-type]
    assert reader.asked == []


def test_the_call_is_charged_as_a_read() -> None:
    assert charge_of("ListAlertDeliveries", pb.ListAlertDeliveriesRequest()) == Charge(READ_RATE)
