"""The api's and the projector's operator endpoints on a running service: the api counts
JobService calls by method and status and times them, its Kafka clients report; the
projector counts the events it applies and is ready once caught up. The api's gRPC health
follows its reply reader: an api whose reader reads nothing (a replies topic that does not
exist) is NOT_SERVING and says why, and one whose reader stops turns NOT_SERVING."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cronlog.infra.composition import build_api
from cronlog.infra.config import Settings
from cronlog.infra.grpc.server import ApiServer
from cronlog.infra.observability.api import ApiObservation
from cronlog.infra.observability.server import OperatorEndpoints
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, free_port, start_service, stop_service
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Running:
    def __init__(self, service: RunningService, api: str, projector: str) -> None:
        self.service = service
        self.api = api
        self.projector = projector


@pytest.fixture(scope="module")
def running(stack_settings: object) -> Iterator[Running]:
    api_port, projector_port = free_port(), free_port()
    service = start_service(stack_settings, "api_projector_metrics",
                            roles=("api", "scheduler", "projector"),
                            extra_env={"CRONLOG_API_METRICS_PORT": str(api_port),
                                       "CRONLOG_PROJECTOR_METRICS_PORT": str(projector_port)})
    try:
        yield Running(service, f"http://127.0.0.1:{api_port}",
                      f"http://127.0.0.1:{projector_port}")
    finally:
        stop_service(service)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the series with exactly these labels (in any order)."""
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match is None:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
        if found == labels:
            return float(match.group(2))
    return None


def metric(url: str, name: str, **labels: str) -> float | None:
    return sample(get(url + "/metrics")[1], name, **labels)


def spec(tenant: str, cron: str) -> pb.JobSpec:
    return pb.JobSpec(name="watched", tenant=tenant, handler="echo", cron=cron,
                      time_zone="Europe/Berlin")


def health(channel: grpc.Channel) -> int:
    return int(health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service="cronlog.v1.JobService"), timeout=2).status)


def test_the_api_counts_calls_by_method_and_status(running: Running) -> None:
    stub = pb_grpc.JobServiceStub(running.service.channel)
    tenant = "m-" + uuid.uuid4().hex[:6]
    stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()),
                                       spec=spec(tenant, "0 3 * * *")), timeout=30)
    with pytest.raises(grpc.RpcError) as refused:
        stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()),
                                           spec=spec(tenant, "not cron")), timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as missing:
        stub.GetJob(pb.GetJobRequest(job_id=str(uuid.uuid4())), timeout=30)

    text = get(running.api + "/metrics")[1]
    assert sample(text, "cronlog_api_requests_total", method="CreateJob", code="OK") == 1
    assert sample(text, "cronlog_api_requests_total", method="CreateJob",
                  code="INVALID_ARGUMENT") == 1
    assert sample(text, "cronlog_api_requests_total", method="GetJob",
                  code=missing.value.code().name) == 1
    assert sample(text, "cronlog_api_request_duration_seconds_count", method="CreateJob") == 2
    # The health checks the fixture made are not JobService's, so not counted.
    assert 'method="Check"' not in text
    assert sample(text, "cronlog_ready", role="api") == 1
    assert get(running.api + "/readyz") == (200, '{"ready": true, "role": "api"}\n')
    # Statistics come every 5 s: the inbox producer and the reply reader report.
    wait_for(lambda: (metric(running.api, "cronlog_kafka_brokers_up", client="commands") or 0)
             >= 1, 30, "the inbox producer's statistics")
    replies = running.service.settings.replies_topic
    wait_for(lambda: metric(running.api, "cronlog_kafka_consumer_lag_messages",
                            client="replies", topic=replies) is not None,
             30, "the reply reader's lag")


def test_the_projector_applies_events_and_is_ready_when_caught_up(running: Running) -> None:
    stub = pb_grpc.JobServiceStub(running.service.channel)
    tenant = "p-" + uuid.uuid4().hex[:6]
    for _ in range(3):
        stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()),
                                           spec=spec(tenant, "0 4 * * *")), timeout=30)
    wait_for(lambda: (metric(running.projector, "cronlog_projector_events_applied_total",
                             event="JobCreated") or 0) >= 3, 60, "three JobCreated applied")
    wait_for(lambda: get(running.projector + "/readyz")[0] == 200, 60, "the projector ready")
    # Caught up: no lag, in seconds or messages (the history consumer has read to the end).
    wait_for(lambda: metric(running.projector, "cronlog_projector_lag_messages") == 0, 30,
             "the projector caught up")
    assert metric(running.projector, "cronlog_projector_lag_seconds") == 0
    assert metric(running.projector, "cronlog_kafka_brokers_up", client="history") == 1
    events = running.service.settings.job_events_topic
    assert metric(running.projector, "cronlog_kafka_consumer_lag_messages", client="history",
                  topic=events) is not None
    assert metric(running.projector, "cronlog_ready", role="projector") == 1


class WrongReplies(Settings):
    """Test-only: an api reading a replies topic that does not exist."""

    @property
    def replies_topic(self) -> str:
        return self.topic("replies-that-do-not-exist")


def in_process_api(settings: Settings) -> tuple[ApiServer, OperatorEndpoints, grpc.Channel]:
    settings = settings.with_overrides(grpc_address=f"127.0.0.1:{free_port()}")
    observation = ApiObservation()
    server = build_api(settings, observation)
    endpoints = OperatorEndpoints(observation.metrics, observation.readiness, "127.0.0.1",
                                  0).start()
    server.start()
    return server, endpoints, grpc.insecure_channel(settings.grpc_address)


def test_health_follows_the_reply_reader(running: Running) -> None:
    settings = running.service.settings
    assert isinstance(settings, Settings)
    wrong = WrongReplies(**{f: getattr(settings, f) for f in settings.__dataclass_fields__})
    server, endpoints, channel = in_process_api(wrong)
    try:
        # The owners are caught up (the service's api is SERVING), the reader is not.
        assert health(running.service.channel) == SERVING
        # Once the watch has read the owners, the reader is all that keeps it from serving.
        wait_for(lambda: "partitions" not in get(endpoints.url + "/readyz")[1], 10,
                 "the owners read")
        assert health(channel) == NOT_SERVING
        status, body = get(endpoints.url + "/readyz")
        assert status == 503 and json.loads(body)["not_ready"] == [
            f"the reply reader reads no partition of {wrong.replies_topic} (does the topic "
            "exist?)"], body
    finally:
        channel.close()
        server.stop()
        endpoints.stop()

    server, endpoints, channel = in_process_api(settings)
    try:
        wait_for(lambda: health(channel) == SERVING, 30, "the second api SERVING")
        # Test-only: the reply reader leaves its loop as it would when the channel closes.
        server._channel._stop.set()
        wait_for(lambda: health(channel) == NOT_SERVING, 10, "NOT_SERVING once it stopped")
        status, body = get(endpoints.url + "/readyz")
        assert status == 503 and "the reply reader is not running" in body, body
        assert metric(endpoints.url, "cronlog_ready", role="api") == 0
    finally:
        channel.close()
        server.stop()
        endpoints.stop()
