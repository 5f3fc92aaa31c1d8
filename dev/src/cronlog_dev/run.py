"""`cronlog-dev run` (what `make run` calls): the local servers and every role on this
machine, until Ctrl-C.

Two launcher variables move a whole run, for a test beside a developer's own `make run`:
CRONLOG_STATE_DIR (the state root; the run's folder is its `run/`) and
CRONLOG_RUN_PORT_OFFSET (added to every port the run uses, documented ones included)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from cronlog.infra.setting_names import unknown_settings
from cronlog_dev.example_handlers import worker_path
from cronlog_dev.processes import role_environment, spawn, stop_all
from cronlog_dev.prometheus_config import prometheus_config
from cronlog_dev.run_plan import (
    PROMETHEUS_PORT,
    PlannedRole,
    banner,
    metrics_targets,
    shifted_plan,
    unavailable,
)
from cronlog_dev.run_settings import (
    PORT_OFFSET_VARIABLE,
    RunSettings,
    RunSettingsError,
    merge,
)
from cronlog_dev.stack.kafka_cluster import kafka_brokers_from_env
from cronlog_dev.stack.local_stack import RUN_PORTS, LocalStack, StackPorts, shifted
from cronlog_dev.stack.process import StackError

ENV_FILE_NAME = "cronlog.env"
# Exit statuses: settings refused before anything started; the service did not come up.
REFUSED = 2
FAILED = 1


def kafka_line(addresses: list[str], replication: int, min_insync: int) -> str:
    if len(addresses) == 1:
        return f"Kafka: {addresses[0]} (one broker; CRONLOG_KAFKA_BROKERS=3 for a cluster)"
    return (f"Kafka: {len(addresses)} brokers {', '.join(addresses)}; topics at replication "
            f"factor {replication}, min.insync.replicas {min_insync}")


def history_line(host: str, port: int, user: str, env_file: str) -> str:
    """Where the run history is and how to sign in: the analyst's way in (issue 32)."""
    return (f"Run history: ClickHouse {host}:{port}, user {user} (its password is in "
            f"{env_file}); docs/analytics.md\n"
            f"  CRONLOG_ENV_FILE={env_file} .venv/bin/cronlog sql "
            '"SELECT run_status, count() FROM runs FINAL GROUP BY run_status"')


def example(address: str, kafka: str = "", endpoints: str = "",
            logs: str = ".cronlog/run/logs/", history: str = "") -> str:
    return f"""
cronlog is running. gRPC: {address}  (reflection and health are on)
{kafka}
{endpoints}

Create a job that echoes its payload every 10 seconds, Berlin time:
  .venv/bin/cronlog --address {address} jobs create --name hello --tenant demo \\
      --handler echo --payload 'hi' --cron '*/10 * * * * *' --time-zone Europe/Berlin
  .venv/bin/cronlog --address {address} runs list --tenant demo

{history}

With grpcurl (installed by `make run` into tools/bin):
  tools/bin/grpcurl -plaintext -d '{{"request_id":"r1","spec":{{"name":"hello2","tenant":"demo",\\
"queue":"default","handler":"echo","cron":"*/5 * * * * *","time_zone":"UTC"}}}}' \\
      {address} cronlog.v1.JobService/CreateJob

Logs: {logs}   Stop: Ctrl-C
"""


# A cold start (Kafka's group forming, every partition's catch-up) takes seconds here; this
# bounds the wait for a service that cannot become ready (see the roles' logs then).
READY_WITHIN = 120.0


def wait_until_serving(address: str, processes: Mapping[str, subprocess.Popen[bytes]],
                       within: float = READY_WITHIN,
                       stopped: threading.Event | None = None) -> str | None:
    """Waits for the api's health to say SERVING (every inbox partition has a caught-up
    scheduler); returns what went wrong instead, if anything, and None at once when
    stopped (Ctrl-C while waiting)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + within
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if stopped is not None and stopped.is_set():
                return None
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


def write_prometheus_config(plan: tuple[PlannedRole, ...], run_dir: Path,
                            listen_port: int = PROMETHEUS_PORT) -> str:
    """A Prometheus configuration for this run, and the command that starts one on it."""
    config = run_dir / "prometheus.yml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(prometheus_config(metrics_targets(plan)))
    return (f"prometheus --config.file={config} --storage.tsdb.path={run_dir / 'prometheus'}"
            f" --web.listen-address=127.0.0.1:{listen_port}")


def port_offset(environ: Mapping[str, str]) -> int:
    raw = environ.get(PORT_OFFSET_VARIABLE, "").strip()
    try:
        return int(raw or "0")
    except ValueError:
        raise RunSettingsError(f"{PORT_OFFSET_VARIABLE}: expected a whole number (negative "
                               f"moves ports down), got {raw!r}") from None


def run_ports(offset: int, brokers: int) -> tuple[StackPorts, tuple[PlannedRole, ...]]:
    """The stack's ports and the run plan, moved by offset; every one a port a user may bind."""
    ports = shifted(RUN_PORTS, offset)
    plan = shifted_plan(offset)
    # A cluster's nodes listen 10 apart above node 1 (kafka_cluster.py).
    every = [*(p.port for p in plan), PROMETHEUS_PORT + offset, ports.postgres,
             ports.clickhouse_tcp, ports.clickhouse_http, ports.grpc,
             ports.kafka + 10 * (brokers - 1), ports.kafka_controller + 10 * (brokers - 1)]
    outside = sorted(p for p in every if not 1024 <= p <= 65535)
    if outside:
        raise RunSettingsError(f"{PORT_OFFSET_VARIABLE}={offset} moves ports outside "
                               f"1024-65535: {', '.join(map(str, outside))}")
    return ports, plan


def planned_env(plan: tuple[PlannedRole, ...]) -> dict[str, str]:
    return {name: value for p in plan for name, value in p.env.items()}


def display_path(path: Path) -> str:
    """As the banner prints a path: relative to where `make run` runs, when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def write_env_file(path: Path, lines: list[str]) -> None:
    """The settings operator commands need, passwords among them: created 0600 under a
    new name and renamed over the old file, so it is never readable by others, not even
    for an instant, and a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("# Written by `make run` for cronlog's operator commands; it holds "
                  "passwords (mode 0600).\n# Use: cronlog --env-file "
                  f"{display_path(path)} ..., or export CRONLOG_ENV_FILE. Variables set "
                  "in the environment win over these.\n")
        out.write("".join(line + "\n" for line in lines))
    os.replace(partial, path)


def settings_lines(run: RunSettings, env_file: Path) -> str:
    given = run.non_default()
    lines = [f"Operator commands (cronlog audit, replay, jobs ...): export "
             f"CRONLOG_ENV_FILE={display_path(env_file)}"]
    if given:
        lines.append("Your settings (not the defaults):")
        lines += [f"  {name}={value}" for name, value in given.items()]
    unknown = unknown_settings(run.given)
    if unknown:
        lines.append("Not cronlog's settings, ignored (misspelt?):")
        lines += [f"  {line}" for line in unknown]
    return "\n".join(lines)


def prepare(environ: Mapping[str, str], state_root: Path
            ) -> tuple[LocalStack, tuple[PlannedRole, ...], RunSettings, int]:
    """Everything decided before anything starts: ports, the stack, the roles' settings.
    Raises RunSettingsError (or StackError for CRONLOG_KAFKA_BROKERS) naming the variable."""
    brokers = kafka_brokers_from_env()
    offset = port_offset(environ)
    ports, plan = run_ports(offset, brokers)
    run_dir = state_root / "run"
    # Built once to learn the stack's own values (addresses, its passwords), then again
    # with the partitions the user chose: the broker's default for new topics follows them
    # (the Kafka partitions of the layout, CRONLOG_KAFKA_PARTITIONS or CRONLOG_PARTITIONS).
    stack = LocalStack(run_dir, ports, brokers=brokers)
    run = merge(environ, stack.settings(), planned_env(plan), brokers)
    stack = LocalStack(run_dir, ports, partitions=run.settings.layout.kafka, brokers=brokers)
    return stack, plan, run, offset


def run_dev(state_root: Path) -> None:
    """Runs until Ctrl-C; exits with status REFUSED when the settings cannot be used (nothing
    started) and FAILED when the service did not come up."""
    try:
        stack, plan, run, offset = prepare(os.environ, state_root)
    except (RunSettingsError, StackError) as exc:
        print(f"cannot start: {exc}", flush=True)
        raise SystemExit(REFUSED) from None
    taken = unavailable(plan)
    if taken:
        print("cannot start: " + "; ".join(taken) + " (stop what listens there)", flush=True)
        raise SystemExit(REFUSED)
    settings = run.settings
    run_dir = stack.state_dir
    brokers = "Kafka" if stack.brokers == 1 else f"{stack.brokers} Kafka brokers"
    print(f"starting {brokers}, PostgreSQL and ClickHouse on 127.0.0.1 ...", flush=True)
    processes: list[subprocess.Popen[bytes]] = []
    stopped = threading.Event()

    def handle(_signum: int, _frame: object) -> None:
        stopped.set()

    failed = False
    try:
        # Ctrl-C while the servers start (an install may take minutes) interrupts at once,
        # and the finally below stops what started; from here on it ends the loop below.
        stack.start()
        signal.signal(signal.SIGINT, handle)
        signal.signal(signal.SIGTERM, handle)
        from cronlog.infra.provision import provision

        provision(settings)
        env_file = run_dir / ENV_FILE_NAME
        write_env_file(env_file, run.env_file_lines())
        logs = run_dir / "logs"
        if not stopped.is_set():
            processes = [spawn(p.role, role_environment(
                os.environ, run.env,
                {**p.env, **(worker_path(os.environ) if p.role == "worker" else {})}), logs)
                         for p in plan]
            print("waiting until every partition has a scheduler that has caught up ...",
                  flush=True)
        roles = dict(zip((p.role for p in plan), processes, strict=False))
        # The banner's example must work on its first try: printed once commands can be
        # decided, not when the processes merely started.
        problem = None if stopped.is_set() else wait_until_serving(
            settings.grpc_address, roles, stopped=stopped)
        if problem is not None:
            print(f"cronlog is not ready: {problem}; see {display_path(logs)}/", flush=True)
            failed = True
            stopped.set()
        elif not stopped.is_set():
            endpoints = banner(plan, write_prometheus_config(plan, run_dir,
                                                             PROMETHEUS_PORT + offset))
            print(example(settings.grpc_address, kafka_line(
                stack.kafka_addresses, settings.topic_replication_factor,
                settings.topic_min_insync_replicas), endpoints + "\n" + settings_lines(
                    run, env_file), display_path(logs) + "/", history_line(
                    settings.clickhouse_host, settings.clickhouse_port,
                    settings.clickhouse_user, display_path(env_file))), flush=True)
        while not stopped.wait(1.0):
            for role, p in roles.items():
                if p.poll() is not None:
                    print(f"{role} exited with {p.returncode}; see {logs / (role + '.log')}",
                          flush=True)
                    failed = True
                    stopped.set()
    except StackError as exc:
        print(f"cannot start the local servers: {exc}", flush=True)
        failed = True
    finally:
        print("stopping ...", flush=True)
        stop_all(processes)
        stack.stop()
    if failed:
        raise SystemExit(FAILED)
