"""cronlog against a Kafka broker that takes only SASL/SCRAM over TLS (SASL_SSL,
SCRAM-SHA-512, a certificate authority made for the test), and the shared stack's ClickHouse
user with its password: provision, the four roles, a job that fires and lands in history.

The broker is this module's own (ports 26092/26093, below Linux's ephemeral range so that no
client's own port can take them, moved by CRONLOG_TEST_PORT_OFFSET; state
under .cronlog/), so it runs beside the shared stack's plaintext broker."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from clickhouse_driver import Client
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from cronlog.infra.config import Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.processes import settings_env, spawn_role, stop_all
from cronlog_dev.stack.secured_kafka import SecuredKafkaBroker
from tests.conftest import ROOT, make_isolated
from tests.e2e.conftest import free_port
from tests.support.api_ready import first_exited, wait_for_api
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration

ROLES = ("api", "scheduler", "worker", "projector", "notifier")


@pytest.fixture(scope="module")
def broker() -> Iterator[SecuredKafkaBroker]:
    offset = int(os.environ.get("CRONLOG_TEST_PORT_OFFSET", "0"))
    secured = SecuredKafkaBroker(ROOT / ".cronlog" / f"secured-kafka-{26092 + offset}",
                                 port=26092 + offset, controller_port=26093 + offset)
    secured.start()
    try:
        yield secured
    finally:
        secured.stop()


@pytest.fixture
def settings(stack_settings: Settings, broker: SecuredKafkaBroker) -> Settings:
    isolated = make_isolated(stack_settings)
    assert isinstance(isolated, Settings)
    # The shared stack's ClickHouse is reached as a user with a password, as in production.
    assert isolated.clickhouse_password
    return isolated.with_overrides(kafka_bootstrap=broker.bootstrap,
                                   kafka_config=broker.client_config(),
                                   grpc_address=f"127.0.0.1:{free_port()}")


def _errors_of(config: dict[str, str], seconds: float = 8) -> tuple[bool, list[KafkaError]]:
    """Whether a client with config reads the cluster's metadata, and the errors it met."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append, "log_level": 0,
                         "socket.timeout.ms": 3000, "reconnect.backoff.ms": 500})
    try:
        producer.list_topics(timeout=seconds)
        reached = True
    except KafkaException:
        reached = False
    producer.poll(0.5)  # serves the error callbacks
    return reached, errors


def test_the_broker_refuses_clients_without_the_credentials(broker: SecuredKafkaBroker) -> None:
    secured = dict(broker.client_config())
    base = {"bootstrap.servers": broker.bootstrap}

    reached, _ = _errors_of({**base, **secured})
    assert reached, "the control: with the credentials and the CA the broker answers"

    reached, _ = _errors_of(base)
    assert not reached, "a plaintext client without credentials must be refused"

    reached, errors = _errors_of({**base, **secured, "sasl.password": "not-the-password"})
    assert not reached
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors[:3]

    without_ca = {k: v for k, v in secured.items() if k != "ssl.ca.location"}
    reached, errors = _errors_of({**base, **without_ca})
    assert not reached, "the broker's certificate is trusted only through the test's CA"
    assert any(e.code() == KafkaError._SSL for e in errors), errors[:3]


def test_the_whole_path_runs_over_sasl_ssl(settings: Settings, broker: SecuredKafkaBroker,
                                           tmp_path: Path) -> None:
    env = {**os.environ, **settings_env(settings)}
    # The variables the roles read give back the same settings, secrets included.
    assert settings_from_env(env).kafka_config == broker.client_config()
    assert broker.password not in repr(settings_from_env(env))

    provisioned = subprocess.run(
        [sys.executable, "-m", "cronlog.infra.entrypoints.cli", "provision"],
        env=env, capture_output=True, text=True, timeout=120, check=False)
    assert provisioned.returncode == 0, provisioned.stderr
    topics = AdminClient({"bootstrap.servers": broker.bootstrap, **dict(broker.client_config())}
                         ).list_topics(timeout=15).topics
    assert settings.inbox_topic in topics and settings.dispatch_topic("default") in topics

    log_dir = ROOT / ".cronlog" / "test-logs" / f"secured-{settings.topic_prefix.rstrip('.')}"
    tag = settings.topic_prefix.rstrip(".")
    processes = {role: spawn_role(role, settings, log_dir,
                                  {"CRONLOG_INSTANCE_ID": f"{tag}-{role}"})
                 for role in ROLES}
    channel = grpc.insecure_channel(settings.grpc_address)
    try:
        wait_for_api(channel, 90, lambda: first_exited(processes, log_dir),
                     "api health SERVING over the secured broker")
        stub = pb_grpc.JobServiceStub(channel)
        spec = pb.JobSpec(name="over-sasl-ssl", tenant="secured", handler="echo",
                          payload=b"through SCRAM and TLS")
        spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=3))
        job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                             timeout=30).job

        def succeeded() -> list[pb.Run] | None:
            runs = stub.ListRuns(pb.ListRunsRequest(job_id=job.job_id,
                                                    status=pb.RUN_STATUS_SUCCEEDED),
                                 timeout=10).runs
            return list(runs) or None

        run = wait_for(succeeded, 60, "the one-off job's run SUCCEEDED through ListRuns")[0]
        got = stub.GetRun(pb.GetRunRequest(run_id=run.run_id), timeout=10).run
        assert got.status == pb.RUN_STATUS_SUCCEEDED
        assert got.attempts[0].output == b"through SCRAM and TLS"

        client = Client(settings.clickhouse_host, port=settings.clickhouse_port,
                        user=settings.clickhouse_user, password=settings.clickhouse_password)
        rows = client.execute(
            f"SELECT run_status FROM {settings.clickhouse_database}.runs FINAL "
            "WHERE run_id = %(run)s", {"run": run.run_id})
        assert rows == [("succeeded",)]
        for role, process in processes.items():
            assert process.poll() is None, f"{role} exited; see {log_dir / (role + '.log')}"
    finally:
        channel.close()
        stop_all(list(processes.values()))

