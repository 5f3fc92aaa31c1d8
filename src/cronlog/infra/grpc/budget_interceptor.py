"""Each tenant's budget of the api, applied to every JobService call (infra/grpc/tenant_budget.py).

It runs inside the tenant check, on the thread that will run the call: the tenant is the one
the call authenticated as, or, when the api runs open, the one the request names. A call
over its tenant's share of the server's threads, or over its command or read rate, or a
PreviewSchedule past the previews the api runs at once (tenant_budget.HEAVY_CALLS), or a
TestChannel past the channel tests it runs at once or a tenant's per minute (SENDS), is
answered RESOURCE_EXHAUSTED at once, with `retry-after` (whole seconds) in its trailing
metadata, and never reaches the servicer. Health and reflection pass untouched; so would a
streaming method (JobService has none).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from typing import Any, NoReturn, Protocol

import grpc

from cronlog.infra.grpc import auth
from cronlog.infra.grpc.interception import MethodHandler, ServiceMethodInterceptor
from cronlog.infra.grpc.tenant_budget import (
    COMMAND_RATE,
    HEAVY_PAGE_ROWS,
    HEAVY_SHARE,
    READ_RATE,
    SEND_BURST,
    SEND_CALLS,
    SEND_RATE,
    SEND_SHARE,
    SEND_TENANT_CALLS,
    SENDS,
    SENDS_PER_MINUTE,
    TENANT_SHARE,
    HeavyCalls,
    TenantBuckets,
    TenantShare,
    charge_of,
    is_heavy,
    read_bytes_charge,
    requested_tenant,
    retry_after,
)

log = logging.getLogger(__name__)

Behavior = Callable[[Any, grpc.ServicerContext], Any]


class RefusalMetrics(Protocol):
    def request_refused(self, reason: str) -> None: ...


class TenantBudget:
    """The buckets and the share every call of the server draws on."""

    def __init__(self, command_rate: float, command_burst: int, read_rate: float,
                 read_burst: int, threads: int, share: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.buckets = {COMMAND_RATE: TenantBuckets(command_rate, command_burst, clock),
                        READ_RATE: TenantBuckets(read_rate, read_burst, clock)}
        self.share = TenantShare.of_threads(threads, share)
        self.heavy = HeavyCalls()
        # Channel tests (tenant_budget.SENDS): a bucket a minute's worth, and a gate.
        self.buckets[SEND_RATE] = TenantBuckets(SENDS_PER_MINUTE / 60, SEND_BURST, clock)
        self.sends = HeavyCalls(SEND_CALLS, SEND_TENANT_CALLS)

    def gate_of(self, method: str, request: Any) -> tuple[HeavyCalls, str] | None:
        """The calls-at-once gate a call passes, with the refusal's reason; None: none."""
        if method in SENDS:
            return self.sends, SEND_SHARE
        return (self.heavy, HEAVY_SHARE) if is_heavy(method, request) else None


class TenantBudgetInterceptor(ServiceMethodInterceptor):
    def __init__(self, service: str, methods: Collection[str], budget: TenantBudget,
                 metrics: RefusalMetrics | None = None) -> None:
        super().__init__(service, methods)
        self._budget = budget
        self._metrics = metrics

    def intercepted(self, handler: MethodHandler, method: str) -> MethodHandler:
        unary = handler.unary_unary
        if handler.request_streaming or handler.response_streaming or unary is None:
            return handler
        return grpc.unary_unary_rpc_method_handler(
            self._budgeted(unary, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)

    def _budgeted(self, behavior: Behavior, method: str) -> Behavior:
        budget = self._budget

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            tenant = auth.caller_tenant()
            if tenant is None:
                tenant = requested_tenant(request)
            if not budget.share.enter(tenant):
                self._refuse(context, TENANT_SHARE, 1.0,
                             f"tenant {tenant!r} has {budget.share.most} calls running, its "
                             "share of the api's threads")
            try:
                charge = charge_of(method, request)
                if charge.kind is not None:
                    wait = budget.buckets[charge.kind].take(tenant, charge.cost)
                    if wait:
                        bucket = budget.buckets[charge.kind]
                        what = {COMMAND_RATE: "commands", READ_RATE: "reads"}.get(
                            charge.kind, "channel tests")
                        self._refuse(context, charge.kind, wait,
                                     f"tenant {tenant!r} is over its rate of {what} "
                                     f"({bucket.rate:g} a second, {bucket.burst} at once)")
                gated = budget.gate_of(method, request)
                if gated is None:
                    return self._charged_after(behavior(request, context), charge.kind,
                                               tenant)
                gate, reason = gated
                if not gate.enter(tenant):
                    self._refuse(context, reason, 1.0,
                                 f"the api runs at most {gate.most} heavy calls at "
                                 f"once, {gate.tenants.most} of one tenant "
                                 f"({gate.running} running): previews, and pages of "
                                 f"more than {HEAVY_PAGE_ROWS.get(method, 0)} rows" if
                                 method in HEAVY_PAGE_ROWS else
                                 f"the api runs at most {gate.most} {method} calls "
                                 f"at once, {gate.tenants.most} of one tenant "
                                 f"({gate.running} running)")
                try:
                    return self._charged_after(behavior(request, context), charge.kind,
                                               tenant)
                finally:
                    gate.leave(tenant)
            finally:
                budget.share.leave(tenant)

        return call

    def _charged_after(self, response: Any, kind: str | None, tenant: str) -> Any:
        """A read's answer charged by its bytes too (tenant_budget.READ_BYTES_PER_TOKEN)."""
        if kind == READ_RATE:
            extra = read_bytes_charge(response)
            if extra:
                self._budget.buckets[READ_RATE].owe(tenant, extra)
        return response

    def _refuse(self, context: grpc.ServicerContext, reason: str, wait: float,
                message: str) -> NoReturn:
        seconds = retry_after(wait)
        if self._metrics is not None:
            self._metrics.request_refused(reason)
        context.set_trailing_metadata((("retry-after", str(seconds)),))
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                      f"{message}; retry after {seconds} s")
        raise AssertionError("unreachable")  # context.abort raises
