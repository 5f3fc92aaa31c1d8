"""`cronlog dev` (what `make run` calls): the whole service on this machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from cronlog.infra.config import Settings
from cronlog.infra.stack.local_stack import RUN_PORTS, LocalStack

ROLES = ("api", "scheduler", "worker", "projector")


def settings_env(settings: Settings) -> dict[str, str]:
    return {
        "CRONLOG_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CRONLOG_POSTGRES_DSN": settings.postgres_dsn,
        "CRONLOG_CLICKHOUSE_HOST": settings.clickhouse_host,
        "CRONLOG_CLICKHOUSE_PORT": str(settings.clickhouse_port),
        "CRONLOG_CLICKHOUSE_DATABASE": settings.clickhouse_database,
        "CRONLOG_CLICKHOUSE_USER": settings.clickhouse_user,
        "CRONLOG_CLICKHOUSE_PASSWORD": settings.clickhouse_password,
        "CRONLOG_HTTP_ALLOW": ",".join(settings.http_allow),
        "CRONLOG_TOPIC_PREFIX": settings.topic_prefix,
        "CRONLOG_PARTITIONS": str(settings.partitions),
        "CRONLOG_GRPC_ADDRESS": settings.grpc_address,
        "CRONLOG_QUEUES": ",".join(settings.queues),
        "CRONLOG_WORKER_QUEUES": ",".join(settings.worker_queues),
        "CRONLOG_TENANT_QUEUES": allow_list_env(settings.tenant_queues),
        "CRONLOG_TENANT_HANDLERS": allow_list_env(settings.tenant_handlers),
        "CRONLOG_API_OPEN": "1" if settings.api_open else "0",
        "CRONLOG_WORKER_SLOTS": str(settings.worker_slots),
        "CRONLOG_LOOKAHEAD_MS": str(int(settings.lookahead.total_seconds() * 1000)),
        "CRONLOG_HANDOVER_REACH_MS": str(int(settings.handover_reach.total_seconds() * 1000)),
        # At most the lookahead means off, and the variable must be positive.
        "CRONLOG_SPARSE_LOOKAHEAD_MS": str(int(
            max(settings.sparse_lookahead, settings.lookahead).total_seconds() * 1000)),
        "CRONLOG_OWNER_BATCH": str(settings.owner_batch),
        "CRONLOG_CATCH_UP_WINDOW_MS": str(int(settings.catch_up_window.total_seconds() * 1000)),
        "CRONLOG_START_TIMEOUT_MS": str(int(settings.start_timeout.total_seconds() * 1000)),
        "CRONLOG_HEARTBEAT_INTERVAL_MS": str(
            int(settings.heartbeat_interval.total_seconds() * 1000)),
        "CRONLOG_CANCEL_GRACE_MS": str(int(settings.cancel_grace.total_seconds() * 1000)),
        "CRONLOG_PROJECTOR_NICE": str(settings.projector_nice),
        "CRONLOG_WORKER_NICE": str(settings.worker_nice),
        "CRONLOG_HANDLER_MODULES": ",".join(settings.handler_modules),
        **tenant_limits_env(settings),
    }


def allow_list_env(allowed: Mapping[str, tuple[str, ...]]) -> str:
    """The `tenant:name|name,...` form config.parse_tenant_allow_list reads."""
    return ",".join(f"{tenant}:{'|'.join(names)}" for tenant, names in allowed.items())


def tenant_limits_env(settings: Settings) -> dict[str, str]:
    limits = settings.tenant_limits
    return {
        "CRONLOG_TENANT_MAX_JOBS": str(limits.default.max_jobs),
        "CRONLOG_TENANT_MAX_IN_FLIGHT": str(limits.default.max_in_flight),
        "CRONLOG_TENANT_LIMITS": ",".join(f"{tenant}:{limit.max_jobs}:{limit.max_in_flight}"
                                          for tenant, limit in limits.overrides.items()),
    }


def spawn_role(role: str, settings: Settings, log_dir: Path,
               extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, **settings_env(settings), **(extra_env or {})}
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / f"{role}.log").open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "cronlog.infra.entrypoints.cli", role],
                                stdout=out, stderr=subprocess.STDOUT, env=env)


def stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()


def example(address: str) -> str:
    return f"""
cronlog is running. gRPC: {address}  (reflection and health are on)

Create a job that echoes its payload every 10 seconds, Berlin time:
  .venv/bin/cronlog --address {address} jobs create --name hello --tenant demo \\
      --handler echo --payload 'hi' --cron '*/10 * * * * *' --time-zone Europe/Berlin
  .venv/bin/cronlog --address {address} runs list --tenant demo

With grpcurl (installed by `make run` into tools/bin):
  tools/bin/grpcurl -plaintext -d '{{"request_id":"r1","spec":{{"name":"hello2","tenant":"demo",\\
"queue":"default","handler":"echo","cron":"*/5 * * * * *","time_zone":"UTC"}}}}' \\
      {address} cronlog.v1.JobService/CreateJob

Logs: .cronlog/run/logs/   Stop: Ctrl-C
"""


# A cold start (Kafka's group forming, every partition's catch-up) takes seconds here; this
# bounds the wait for a service that cannot become ready (see the roles' logs then).
READY_WITHIN = 120.0


def wait_until_serving(address: str, processes: Mapping[str, subprocess.Popen[bytes]],
                       within: float = READY_WITHIN) -> str | None:
    """Waits for the api's health to say SERVING (every inbox partition has a caught-up
    scheduler); returns what went wrong instead, if anything."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + within
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            for role, p in processes.items():
                if p.poll() is not None:
                    return f"{role} exited with {p.returncode}"
            try:
                reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return None
            except grpc.RpcError:
                pass
            time.sleep(0.2)
    return f"the api did not report SERVING within {within:.0f}s"


def run_dev(state_root: Path) -> None:
    stack = LocalStack(state_root / "run", RUN_PORTS)
    print("starting Kafka, PostgreSQL and ClickHouse on 127.0.0.1 ...", flush=True)
    stack.start()
    settings = stack.settings()
    processes: list[subprocess.Popen[bytes]] = []
    stopped = threading.Event()

    def handle(_signum: int, _frame: object) -> None:
        stopped.set()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    try:
        from cronlog.infra.provision import provision

        provision(settings)
        logs = state_root / "run" / "logs"
        processes = [spawn_role(role, settings, logs) for role in ROLES]
        print("waiting until every partition has a scheduler that has caught up ...",
              flush=True)
        # The banner's example must work on its first try: printed once commands can be
        # decided, not when the processes merely started.
        problem = wait_until_serving(settings.grpc_address, dict(zip(ROLES, processes,
                                                                     strict=True)))
        if problem is not None:
            print(f"cronlog is not ready: {problem}; see {logs}/", flush=True)
            return
        print(example(settings.grpc_address), flush=True)
        while not stopped.wait(1.0):
            for role, p in zip(ROLES, processes, strict=True):
                if p.poll() is not None:
                    print(f"{role} exited with {p.returncode}; see {logs / (role + '.log')}",
                          flush=True)
                    stopped.set()
    finally:
        print("stopping ...", flush=True)
        stop_all(processes)
        stack.stop()
