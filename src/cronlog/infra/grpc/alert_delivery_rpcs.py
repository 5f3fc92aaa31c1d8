"""ListAlertDeliveries at the gRPC edge (issue 37, docs/alerts.md "What was delivered"): a
page of the caller's tenant's delivery attempts from ClickHouse's alert_deliveries, as a
mixin of JobServiceServicer (whose module is full).

Scoping first, as every tenant RPC: a request naming another tenant is PERMISSION_DENIED
before anything is read, and the page is always of one tenant's rows (the query's first
condition), so another tenant's job or channel simply lists nothing. The request is checked
field by field (INVALID_ARGUMENT naming the field); a page is 1 to MAX_PAGE rows of at most
about 3 KB each, charged as a read plus its bytes (tenant_budget.READS).
"""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

import grpc

from cronlog.domain.bounds import CHANNEL_NAME_PATTERN
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.grpc.channel_rpcs import answered
from cronlog.infra.grpc.convert import micros_out
from cronlog.infra.grpc.error_status import abort
from cronlog.projections.delivery_history import OUTCOMES, AlertDeliveryRow, DeliveryFilter
from cronlog.v1 import job_service_pb2 as pb

DEFAULT_PAGE = 50
MAX_PAGE = 100
MAX_PAGE_TOKEN_CHARS = 512


class AlertDeliveryReader(Protocol):
    """The delivery history as the api reads it (infra/clickhouse/alert_deliveries.py)."""

    def list_deliveries(self, where: DeliveryFilter, page_size: int, page_token: str | None
                        ) -> tuple[list[AlertDeliveryRow], str | None]: ...


def tenant_of(caller: str | None, requested: str) -> str:
    """The caller's tenant when authenticated (the request's, if any, was checked to be the
    same); the request's own in open mode, where it is required."""
    if caller is not None:
        return caller
    if not requested:
        raise InvalidSpec("tenant", "a tenant is required (deliveries are listed per tenant)")
    return requested


def delivery_query(request: pb.ListAlertDeliveriesRequest, tenant: str
                   ) -> tuple[DeliveryFilter, int, str | None]:
    """The page a request asks for; InvalidSpec naming the field it cannot be."""
    job_id = None
    if request.job_id:
        try:
            job_id = str(UUID(request.job_id))
        except ValueError:
            raise InvalidSpec("job_id", f"{request.job_id[:64]!r} is not a UUID") from None
    if request.channel and not CHANNEL_NAME_PATTERN.fullmatch(request.channel):
        raise InvalidSpec("channel", f"{request.channel[:64]!r} is not a channel name "
                                     f"({CHANNEL_NAME_PATTERN.pattern})")
    if request.outcome and request.outcome not in OUTCOMES:
        raise InvalidSpec("outcome", f"{request.outcome[:64]!r} is not one of "
                                     f"{', '.join(sorted(OUTCOMES))}")
    if not 0 <= request.page_size <= MAX_PAGE:
        raise InvalidSpec("page_size", f"1 to {MAX_PAGE} (0: {DEFAULT_PAGE}), "
                                       f"not {request.page_size}")
    if len(request.page_token) > MAX_PAGE_TOKEN_CHARS:
        raise InvalidSpec("page_token", "is not a token this service gave out")
    where = DeliveryFilter(tenant=tenant, job_id=job_id, channel_name=request.channel or None,
                           outcome=request.outcome or None)
    return where, request.page_size or DEFAULT_PAGE, request.page_token or None


def attempt_out(row: AlertDeliveryRow) -> pb.AlertDeliveryAttempt:
    return pb.AlertDeliveryAttempt(
        delivery_id=row.delivery_id, attempt=row.attempt, alert_id=row.alert_id,
        tenant=row.tenant, job_id=row.job_id, job_name=row.job_name, kind=row.kind,
        run_id=row.run_id, run_attempt=row.run_attempt, digest_count=row.digest_count,
        message=row.message, channel_id=row.channel_id, channel_name=row.channel_name,
        channel_kind=row.channel_kind, outcome=row.outcome, status_code=row.status_code,
        latency_ms=row.latency_ms, error=row.error, sent_at=micros_out(row.sent_at_us),
        next_attempt_at=micros_out(row.next_attempt_at_us))


class AlertDeliveryRpcs:
    """ListAlertDeliveries of JobServiceServicer; `serve_alert_deliveries` gives it its
    reader (without one it is UNAVAILABLE)."""

    _deliveries: AlertDeliveryReader | None = None

    def serve_alert_deliveries(self, reader: AlertDeliveryReader | None) -> None:
        self._deliveries = reader

    def _scope(self, context: grpc.ServicerContext, *, job_id: str | None = None,
               run_id: str | None = None, tenant: tuple[str, str] | None = None
               ) -> str | None:
        raise NotImplementedError  # JobServiceServicer's

    @answered
    def ListAlertDeliveries(self, request: pb.ListAlertDeliveriesRequest,
                            context: grpc.ServicerContext) -> pb.ListAlertDeliveriesResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        where, page_size, token = delivery_query(request, tenant_of(caller, request.tenant))
        if self._deliveries is None:
            abort(context, grpc.StatusCode.UNAVAILABLE, "this api cannot read alert deliveries")
        rows, next_token = self._deliveries.list_deliveries(where, page_size, token)
        return pb.ListAlertDeliveriesResponse(attempts=[attempt_out(r) for r in rows],
                                              next_page_token=next_token or "")
