"""Counts and times every JobService call: a server interceptor that tells a RequestMetrics
port (infra/observability/api.py) each call's method, status code and duration.

Only JobService's own methods are measured, by their names in the contract: a method name
is whatever a client puts on the wire, and a label taken from it would let any caller add
series without end. Health and reflection calls, and methods no service has, pass through
untouched. The interceptor goes first, so a call the tenant check refuses counts too (as
UNAUTHENTICATED)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from typing import Any, Protocol

import grpc

from cronlog.infra.grpc.interception import MethodHandler, ServiceMethodInterceptor

Behavior = Callable[[Any, grpc.ServicerContext], Any]


class RequestMetrics(Protocol):
    def request_answered(self, method: str, code: str, seconds: float) -> None: ...


def _code_of(context: grpc.ServicerContext, failed: bool) -> str:
    # context.abort() sets the code, then raises; any other exception is UNKNOWN to the
    # caller, and a return without a code set is OK.
    code = context.code()  # type: ignore[attr-defined]
    if isinstance(code, grpc.StatusCode):
        return code.name
    return grpc.StatusCode.UNKNOWN.name if failed else grpc.StatusCode.OK.name


class RequestMetricsInterceptor(ServiceMethodInterceptor):
    def __init__(self, service: str, methods: Collection[str], metrics: RequestMetrics,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        """service: the full name (cronlog.v1.JobService); methods: its method names."""
        super().__init__(service, methods)
        self._metrics = metrics
        self._clock = clock

    def intercepted(self, handler: MethodHandler, method: str) -> MethodHandler:
        if handler.request_streaming:
            return handler  # JobService has no client-streaming method to measure
        if handler.response_streaming:
            streaming = handler.unary_stream
            return handler if streaming is None else grpc.unary_stream_rpc_method_handler(
                self._timed_stream(streaming, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        unary = handler.unary_unary
        return handler if unary is None else grpc.unary_unary_rpc_method_handler(
            self._timed(unary, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)

    def _timed(self, behavior: Behavior, method: str) -> Behavior:
        def call(request: Any, context: grpc.ServicerContext) -> Any:
            began, failed = self._clock(), True
            try:
                answer = behavior(request, context)
                failed = False
                return answer
            finally:
                self._metrics.request_answered(method, _code_of(context, failed),
                                               self._clock() - began)
        return call

    def _timed_stream(self, behavior: Behavior, method: str) -> Behavior:
        def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            began, failed = self._clock(), True
            try:
                yield from behavior(request, context)
                failed = False
            finally:
                self._metrics.request_answered(method, _code_of(context, failed),
                                               self._clock() - began)
        return call
