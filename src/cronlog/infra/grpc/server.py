"""The api process's gRPC server: JobService, health and reflection."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from cronlog.commands.api.readiness import ReadinessWatch
from cronlog.infra.avro.event_mapping import spec_to_record
from cronlog.infra.config import Settings
from cronlog.infra.grpc.servicer import JobServiceServicer
from cronlog.infra.kafka.command_channel import KafkaCommandChannel
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["JobService"].full_name
# The only values the request metrics' method label takes.
SERVICE_METHODS = tuple(m.name for m in pb.DESCRIPTOR.services_by_name["JobService"].methods)

log = logging.getLogger(__name__)


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS credentials from the configured PEM files; None means a plaintext port."""
    if not settings.tls_cert:
        return None
    try:
        cert = Path(settings.tls_cert).read_bytes()
        key = Path(settings.tls_key).read_bytes()
    except OSError as exc:
        raise OSError(f"cannot read the api's TLS certificate or key: {exc}") from exc
    return grpc.ssl_server_credentials([(key, cert)])


class SpecRecords:
    def to_record(self, spec: object) -> dict[str, object]:
        return spec_to_record(spec)  # type: ignore[arg-type]


class Closable(Protocol):
    def close(self) -> None: ...


class ApiServer:
    """The gRPC server and its lifecycle: health NOT_SERVING until the readiness watch says
    commands can be decided (owners caught up, the reply reader reading, the inbox producer
    reaching Kafka), and again whenever it says they cannot; on stop, health first, then
    the server, then what it used."""

    def __init__(self, address: str, credentials: grpc.ServerCredentials | None,
                 interceptors: list[grpc.ServerInterceptor],  # type: ignore[type-arg]
                 servicer: JobServiceServicer, health_servicer: health.HealthServicer,
                 channel: KafkaCommandChannel, readiness: ReadinessWatch,
                 closing: list[Closable], threads: int = 32,
                 maximum_concurrent_rpcs: int | None = 64) -> None:
        """threads: the server's worker threads; maximum_concurrent_rpcs: the calls it takes
        at once, running or waiting for a thread (more are RESOURCE_EXHAUSTED before any
        thread sees them). The reply reader is a thread of the command channel's own, never
        one of these: no call can keep it from reading."""
        self.address = address
        self._health = health_servicer
        self._channel = channel
        self._readiness = readiness
        self._closing = closing
        self._server = grpc.server(ThreadPoolExecutor(max_workers=threads,
                                                      thread_name_prefix="grpc"),
                                   interceptors=interceptors,
                                   maximum_concurrent_rpcs=maximum_concurrent_rpcs)
        pb_grpc.add_JobServiceServicer_to_server(servicer, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), self._server)
        port = (self._server.add_insecure_port(address) if credentials is None
                else self._server.add_secure_port(address, credentials))
        if port == 0:
            raise OSError(f"cannot listen on {address}")

    def start(self) -> None:
        set_serving(self._health, False)
        self._channel.start()
        self._server.start()
        self._readiness.start()

    def stop(self) -> None:
        self._health.enter_graceful_shutdown()
        self._readiness.stop()
        self._server.stop(5).wait()
        self._channel.close()
        for used in self._closing:
            used.close()


def set_serving(health_servicer: health.HealthServicer, ready: bool) -> None:
    status = (health_pb2.HealthCheckResponse.SERVING if ready
              else health_pb2.HealthCheckResponse.NOT_SERVING)
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, status)
