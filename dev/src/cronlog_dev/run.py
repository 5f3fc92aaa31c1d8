"""`cronlog-dev run` (what `make run` calls): the local servers and every role on this
machine, until Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from cronlog_dev.processes import spawn_role, stop_all
from cronlog_dev.prometheus_config import prometheus_config
from cronlog_dev.run_plan import PlannedRole, banner, metrics_targets, run_plan, unavailable
from cronlog_dev.stack.local_stack import RUN_PORTS, LocalStack


def kafka_line(addresses: list[str], replication: int, min_insync: int) -> str:
    if len(addresses) == 1:
        return f"Kafka: {addresses[0]} (one broker; CRONLOG_KAFKA_BROKERS=3 for a cluster)"
    return (f"Kafka: {len(addresses)} brokers {', '.join(addresses)}; topics at replication "
            f"factor {replication}, min.insync.replicas {min_insync}")


def example(address: str, kafka: str = "", endpoints: str = "") -> str:
    return f"""
cronlog is running. gRPC: {address}  (reflection and health are on)
{kafka}
{endpoints}

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


def write_prometheus_config(plan: tuple[PlannedRole, ...], run_dir: Path) -> str:
    """A Prometheus configuration for this run, and the command that starts one on it."""
    config = run_dir / "prometheus.yml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(prometheus_config(metrics_targets(plan)))
    return (f"prometheus --config.file={config} --storage.tsdb.path={run_dir / 'prometheus'}"
            " --web.listen-address=127.0.0.1:39090")


def run_dev(state_root: Path) -> None:
    plan = run_plan()
    taken = unavailable(plan)
    if taken:
        print("cannot start: " + "; ".join(taken) + " (stop what listens there)", flush=True)
        return
    stack = LocalStack(state_root / "run", RUN_PORTS)
    brokers = "Kafka" if stack.brokers == 1 else f"{stack.brokers} Kafka brokers"
    print(f"starting {brokers}, PostgreSQL and ClickHouse on 127.0.0.1 ...", flush=True)
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
        processes = [spawn_role(p.role, settings, logs, p.env) for p in plan]
        roles = [p.role for p in plan]
        print("waiting until every partition has a scheduler that has caught up ...",
              flush=True)
        # The banner's example must work on its first try: printed once commands can be
        # decided, not when the processes merely started.
        problem = wait_until_serving(settings.grpc_address, dict(zip(roles, processes,
                                                                     strict=True)))
        if problem is not None:
            print(f"cronlog is not ready: {problem}; see {logs}/", flush=True)
            return
        endpoints = banner(plan, write_prometheus_config(plan, state_root / "run"))
        print(example(settings.grpc_address, kafka_line(
            stack.kafka_addresses, settings.topic_replication_factor,
            settings.topic_min_insync_replicas), endpoints), flush=True)
        while not stopped.wait(1.0):
            for role, p in zip(roles, processes, strict=True):
                if p.poll() is not None:
                    print(f"{role} exited with {p.returncode}; see {logs / (role + '.log')}",
                          flush=True)
                    stopped.set()
    finally:
        print("stopping ...", flush=True)
        stop_all(processes)
        stack.stop()
