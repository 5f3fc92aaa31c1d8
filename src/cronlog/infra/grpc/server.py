"""The api process's gRPC server: JobService, health and reflection."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from cronlog.commands.job_api import JobApi
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.commands.readiness import ReadinessWatch
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import spec_from_record, spec_to_record
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.config import Settings
from cronlog.infra.grpc.auth import (
    OPEN_MODE_WARNING,
    TenantAuthInterceptor,
    TokenTable,
    check_open_bind,
)
from cronlog.infra.grpc.servicer import JobServiceServicer
from cronlog.infra.kafka.command_channel import KafkaCommandChannel
from cronlog.infra.kafka.scheduler_group import KafkaSchedulerGroup
from cronlog.infra.kafka.topics import require_dispatch_topics
from cronlog.infra.postgres.job_queries import PostgresJobQueries
from cronlog.infra.postgres.partition_owners import PostgresPartitionOwners
from cronlog.infra.system_clock import SystemClock
from cronlog.projections.state import JobRow
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["JobService"].full_name

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


class _SpecRecords:
    def to_record(self, spec: object) -> dict[str, object]:
        return spec_to_record(spec)  # type: ignore[arg-type]


def declared_queues(settings: Settings) -> DeclaredQueues:
    return DeclaredQueues.of(settings.queues, settings.tenant_queues, settings.tenant_handlers)


class ApiServer:
    def __init__(self, settings: Settings, codec: AvroCodec) -> None:
        self.address = settings.grpc_address
        # Before anything connects anywhere: a refused start leaves nothing behind.
        check_open_bind(self.address, bool(settings.tenant_tokens), settings.api_open)
        # Jobs are accepted only for queues an owner can dispatch to.
        require_dispatch_topics(settings, settings.queues)
        self._health = health.HealthServicer()
        self._owner_records = PostgresPartitionOwners(settings.postgres_dsn)
        # Health says SERVING only while every inbox partition's owner has caught up.
        self._readiness = ReadinessWatch(settings.partitions, KafkaSchedulerGroup(settings),
                                         self._owner_records, self._set_serving)
        self._channel = KafkaCommandChannel(settings, codec, codec,
                                            explain=self._readiness.explain)
        self._jobs = PostgresJobQueries(settings.postgres_dsn)
        history = ClickHouseRunHistory(settings.clickhouse_host, settings.clickhouse_port,
                                       settings.clickhouse_database,
                                       settings.clickhouse_user, settings.clickhouse_password)
        clock = SystemClock()
        api = JobApi(bus=self._channel, jobs=self._jobs, queues=declared_queues(settings),
                     specs=_SpecRecords(), clock=clock,
                     reply_timeout=settings.reply_timeout.total_seconds(),
                     limits=settings.tenant_limits)

        def decode_spec(row: JobRow) -> object:
            _, record = codec.decode(row.spec_event)
            return spec_from_record(record["spec"])

        tokens = TokenTable(settings.tenant_tokens)
        interceptors: list[grpc.ServerInterceptor] = []  # type: ignore[type-arg]
        if tokens:
            interceptors.append(TenantAuthInterceptor(tokens))
        else:
            log.warning(OPEN_MODE_WARNING)
        self._server = grpc.server(ThreadPoolExecutor(max_workers=32), interceptors=interceptors)
        pb_grpc.add_JobServiceServicer_to_server(
            JobServiceServicer(api, self._jobs, history, decode_spec, clock,  # type: ignore[arg-type]
                               auth_required=bool(tokens)),
            self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), self._server)
        credentials = server_credentials(settings)
        port = (self._server.add_insecure_port(self.address) if credentials is None
                else self._server.add_secure_port(self.address, credentials))
        if port == 0:
            raise OSError(f"cannot listen on {self.address}")

    def _set_serving(self, ready: bool) -> None:
        status = (health_pb2.HealthCheckResponse.SERVING if ready
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        for name in ("", SERVICE_NAME):
            self._health.set(name, status)

    def start(self) -> None:
        self._set_serving(False)
        self._channel.start()
        self._server.start()
        self._readiness.start()

    def stop(self) -> None:
        self._health.enter_graceful_shutdown()
        self._readiness.stop()
        self._server.stop(5).wait()
        self._channel.close()
        self._jobs.close()
        self._owner_records.close()


def build_api_server(settings: Settings, codec: AvroCodec) -> ApiServer:
    return ApiServer(settings, codec)
