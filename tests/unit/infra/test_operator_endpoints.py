"""A role's /metrics, /healthz and /readyz on a real loopback socket."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from cronlog.infra.config import Settings
from cronlog.infra.observability.catalogue import WORKER_START_LAG
from cronlog.infra.observability.registry import RoleMetrics
from cronlog.infra.observability.server import (
    MetricsPortUnavailable,
    OperatorEndpoints,
    Readiness,
    start_role_endpoints,
)


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


class Switch:
    def __init__(self) -> None:
        self.readiness = Readiness(("queue default: no partitions assigned yet",))

    def __call__(self) -> Readiness:
        return self.readiness


@pytest.fixture
def served() -> Iterator[tuple[OperatorEndpoints, Switch, RoleMetrics]]:
    metrics = RoleMetrics("worker")
    switch = Switch()
    endpoints = OperatorEndpoints(metrics, switch, "127.0.0.1", 0).start()
    yield endpoints, switch, metrics
    endpoints.stop()


def test_metrics_are_served_in_the_prometheus_format(
        served: tuple[OperatorEndpoints, Switch, RoleMetrics]) -> None:
    endpoints, _, metrics = served
    metrics.histogram(WORKER_START_LAG).labels("default").observe(0.3)
    status, kind, body = get(endpoints.url + "/metrics")
    assert status == 200 and kind.startswith("text/plain")
    assert 'cronlog_worker_start_lag_seconds_bucket{le="2.0",queue="default"} 1.0' in body
    assert 'cronlog_ready{role="worker"} 0.0' in body
    assert "process_resident_memory_bytes" in body


def test_alive_always_ready_only_when_the_role_says_so(
        served: tuple[OperatorEndpoints, Switch, RoleMetrics]) -> None:
    endpoints, switch, _ = served
    assert get(endpoints.url + "/healthz")[0] == 200
    status, kind, body = get(endpoints.url + "/readyz")
    assert (status, kind) == (503, "application/json")
    assert json.loads(body) == {"ready": False, "role": "worker",
                                "not_ready": ["queue default: no partitions assigned yet"]}
    switch.readiness = Readiness()
    status, _, body = get(endpoints.url + "/readyz")
    assert status == 200 and json.loads(body) == {"ready": True, "role": "worker"}
    assert 'cronlog_ready{role="worker"} 1.0' in get(endpoints.url + "/metrics")[2]


def test_a_failing_readiness_check_is_not_ready_not_an_error(
        served: tuple[OperatorEndpoints, Switch, RoleMetrics]) -> None:
    endpoints, switch, _ = served

    def broken() -> Readiness:
        raise ConnectionError("secret-host:9092 refused")

    switch.__call__ = broken  # type: ignore[method-assign]
    endpoints._readiness = broken
    status, _, body = get(endpoints.url + "/readyz")
    assert status == 503
    assert json.loads(body)["not_ready"] == ["readiness check failed: ConnectionError"]


def test_other_paths_are_not_found(served: tuple[OperatorEndpoints, Switch, RoleMetrics]) -> None:
    assert get(served[0].url + "/debug")[0] == 404


def test_port_zero_serves_nothing_and_a_taken_port_names_the_setting() -> None:
    metrics = RoleMetrics("worker", default_collectors=False)
    assert start_role_endpoints(Settings(), metrics, Readiness) is None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsPortUnavailable, match="CRONLOG_WORKER_METRICS_PORT"):
            start_role_endpoints(Settings(worker_metrics_port=port), metrics, Readiness)


def test_ports_come_from_the_environment_and_a_bad_one_is_named() -> None:
    from cronlog.infra.config import ConfigError
    from cronlog.infra.config_env import settings_from_env

    settings = settings_from_env({"CRONLOG_WORKER_METRICS_PORT": "9464",
                                  "CRONLOG_METRICS_HOST": "10.0.0.5"})
    assert (settings.worker_metrics_port, settings.metrics_host) == (9464, "10.0.0.5")
    assert settings.api_metrics_port == 0 and Settings().metrics_host == "127.0.0.1"
    with pytest.raises(ConfigError, match="CRONLOG_SCHEDULER_METRICS_PORT"):
        settings_from_env({"CRONLOG_SCHEDULER_METRICS_PORT": "70000"})
