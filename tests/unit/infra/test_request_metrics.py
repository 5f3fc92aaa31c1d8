"""The api's request interceptor: JobService's calls counted by method and status and timed;
other services' calls and methods no contract names are not measured (bounded labels)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import grpc
import pytest
from prometheus_client import generate_latest

from cronlog.infra.grpc.request_metrics import RequestMetricsInterceptor
from cronlog.infra.grpc.server import SERVICE_METHODS, SERVICE_NAME
from cronlog.infra.observability.api import ApiObservation
from cronlog.infra.observability.registry import RoleMetrics


@dataclass
class Details:
    method: str
    invocation_metadata: tuple[tuple[str, str], ...] = ()


def details(method: str) -> grpc.HandlerCallDetails:
    # grpcio's HandlerCallDetails is a protocol, which Details meets; grpc-stubs has a class.
    return cast(grpc.HandlerCallDetails, Details(method))


class Context:
    """What a servicer's context does with codes: abort sets one and raises."""

    def __init__(self) -> None:
        self._code: grpc.StatusCode | None = None

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self._code = code
        raise Exception(details)

    def code(self) -> grpc.StatusCode | None:
        return self._code


def handler(behavior: Callable[[Any, Any], Any]) -> grpc.RpcMethodHandler[Any, Any]:
    return grpc.unary_unary_rpc_method_handler(behavior)


def call(interceptor: RequestMetricsInterceptor, method: str,
         behavior: Callable[[Any, Any], Any]) -> grpc.RpcMethodHandler[Any, Any] | None:
    wrapped = interceptor.intercept_service(lambda _d: handler(behavior), details(method))
    if wrapped is not None and wrapped.unary_unary is not None:
        with contextlib.suppress(Exception):  # aborts and errors: the code is what counts
            # Context is the part of a servicer's context that the interceptor uses.
            wrapped.unary_unary(b"", cast(grpc.ServicerContext, Context()))
    return wrapped


@pytest.fixture
def observed() -> tuple[ApiObservation, RequestMetricsInterceptor]:
    ticks = iter(float(n) * 0.25 for n in range(100))
    observation = ApiObservation(RoleMetrics("api", default_collectors=False))
    return observation, RequestMetricsInterceptor(SERVICE_NAME, SERVICE_METHODS, observation,
                                                  clock=lambda: next(ticks))


def requests(observation: ApiObservation, method: str, code: str) -> float | None:
    return observation.metrics.registry.get_sample_value(
        "cronlog_api_requests_total", {"method": method, "code": code})


def invalid(_request: object, context: Context) -> None:
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "spec.cron: bad")


def broken(_request: object, _context: Context) -> None:
    raise RuntimeError("a bug")


def test_calls_are_counted_by_method_and_status_and_timed(
        observed: tuple[ApiObservation, RequestMetricsInterceptor]) -> None:
    observation, interceptor = observed
    prefix = f"/{SERVICE_NAME}/"
    call(interceptor, prefix + "CreateJob", lambda _r, _c: b"ok")
    call(interceptor, prefix + "CreateJob", invalid)
    call(interceptor, prefix + "ListRuns", broken)
    assert requests(observation, "CreateJob", "OK") == 1
    assert requests(observation, "CreateJob", "INVALID_ARGUMENT") == 1
    assert requests(observation, "ListRuns", "UNKNOWN") == 1
    registry = observation.metrics.registry
    assert registry.get_sample_value("cronlog_api_request_duration_seconds_count",
                                     {"method": "CreateJob"}) == 2
    # Each call took one tick of the fake clock.
    assert registry.get_sample_value("cronlog_api_request_duration_seconds_sum",
                                     {"method": "CreateJob"}) == pytest.approx(0.5)


def test_only_the_contracts_methods_are_measured(
        observed: tuple[ApiObservation, RequestMetricsInterceptor]) -> None:
    observation, interceptor = observed
    assert "CreateJob" in SERVICE_METHODS and "PreviewSchedule" in SERVICE_METHODS
    for method in ("/grpc.health.v1.Health/Check", f"/{SERVICE_NAME}/NoSuchMethod",
                   f"/{SERVICE_NAME}/CreateJob/../x", "/evil.Service/CreateJob"):
        original = handler(lambda _r, _c: b"ok")

        def unchanged(_details: grpc.HandlerCallDetails,
                      h: grpc.RpcMethodHandler[Any, Any] = original
                      ) -> grpc.RpcMethodHandler[Any, Any]:
            return h

        assert interceptor.intercept_service(unchanged, details(method)) is original
    assert "cronlog_api_requests_total{" not in generate_latest(
        observation.metrics.registry).decode()


def test_an_unknown_method_stays_unimplemented(
        observed: tuple[ApiObservation, RequestMetricsInterceptor]) -> None:
    _, interceptor = observed
    assert interceptor.intercept_service(lambda _d: None,
                                         details(f"/{SERVICE_NAME}/CreateJob")) is None
