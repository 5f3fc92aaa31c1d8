"""`cronlog-dev bulk-create`: how fast jobs are created through the api's CreateJobs.

Runs against the servers the CRONLOG_* variables name (`make run`'s, or a test stack's):
its own topic prefix and Postgres database, an api and schedulers of its own, no worker
(the jobs fire yearly). It sends `--jobs` jobs in batches, a few in flight, the way
`cronlog jobs import` does, and reports jobs/s until every item was answered and until
Postgres showed them all, with the CPU each process used; `--profile` records the api and
a scheduler with py-spy meanwhile (docs/bulk-import.md, "Rate").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import psutil
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cronlog.domain.limits import TenantLimit, TenantLimits
from cronlog.infra.config import Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.postgres.connection import ensure_schema
from cronlog.infra.provision import provision
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.stack import UNLIMITED_RATES
from cronlog_dev.processes import spawn_role, stop_all

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney",
         "America/Sao_Paulo", "Asia/Kolkata", "Africa/Cairo")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs to create (20000)")
    parser.add_argument("--batch-size", type=int, default=1000, help="items a call (1000)")
    parser.add_argument("--in-flight", type=int, default=4, help="calls at once (4)")
    parser.add_argument("--schedulers", type=int, default=2, help="scheduler processes (2)")
    parser.add_argument("--partitions", type=int, default=8,
                        help="logical partitions, CRONLOG_PARTITIONS (8)")
    parser.add_argument("--kafka-partitions", type=int, default=0,
                        help="Kafka partitions per topic, CRONLOG_KAFKA_PARTITIONS (default: "
                             "as many as the logical ones)")
    parser.add_argument("--tenants", type=int, default=4, help="tenants the jobs spread over")
    parser.add_argument("--profile", choices=("cpu", "wall"),
                        help="py-spy the api and the first scheduler (needs ptrace rights): "
                             "where their CPU goes, or where their time goes, waits included")
    parser.add_argument("--output", default="", help="also write the figures here as JSON")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _isolated(base: Settings, partitions: int,
              kafka_partitions: int | None = None) -> tuple[Settings, str]:
    """The servers of `base` with a topic prefix and a Postgres database of their own."""
    tag = "bulk" + uuid.uuid4().hex[:8]
    server = base.postgres_dsn.rsplit("/", 1)[0]
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{tag}"')
    settings = base.with_overrides(
        topic_prefix=f"{tag}.", postgres_dsn=f"{server}/{tag}", clickhouse_database=tag,
        partitions=partitions, kafka_partitions=kafka_partitions, grpc_address=f"127.0.0.1:{free_port()}",
        # The jobs of a tenant are bounded by its limit; here the measurement sets it.
        tenant_limits=TenantLimits(default=TenantLimit(max_jobs=10_000_000)),
        **UNLIMITED_RATES)
    ensure_schema(settings.postgres_dsn, partitions)
    return settings, tag


def wait_serving(channel: grpc.Channel, processes: dict[str, subprocess.Popen[bytes]],
                  seconds: float) -> None:
    deadline = time.monotonic() + seconds
    health = health_pb2_grpc.HealthStub(channel)
    while time.monotonic() < deadline:
        gone = [name for name, p in processes.items() if p.poll() is not None]
        if gone:
            raise RuntimeError(f"{', '.join(gone)} exited before the api was ready")
        try:
            if health.Check(health_pb2.HealthCheckRequest(), timeout=1).status == \
                    health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the api was not SERVING within {seconds:.0f} s")


def _batches(jobs: int, size: int, tenants: int, run: str) -> list[pb.CreateJobsRequest]:
    requests = []
    for start in range(0, jobs, size):
        items = []
        for n in range(start, min(jobs, start + size)):
            items.append(pb.CreateJobRequest(request_id=f"{run}-{n}", spec=pb.JobSpec(
                name=f"bulk-{n}", tenant=f"bulk-tenant-{n % tenants}", handler="echo",
                cron=f"{n % 60} {n % 24} 1 1 *", time_zone=ZONES[n % len(ZONES)])))
        requests.append(pb.CreateJobsRequest(items=items))
    return requests


def cpu_seconds(processes: dict[str, subprocess.Popen[bytes]]) -> dict[str, float]:
    seconds = {}
    for name, process in processes.items():
        try:
            times = psutil.Process(process.pid).cpu_times()
            seconds[name] = times.user + times.system
        except psutil.Error:
            seconds[name] = 0.0
    return seconds


def _profile(pid: int, out: Path, seconds: float,
             wall: bool) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        say("py-spy not found: no profile")
        return None
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--duration", str(int(seconds)),
                             "--format", "speedscope", "--output", str(out), "--nonblocking",
                             *(["--idle"] if wall else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def send_batches(stubs: Sequence[pb_grpc.JobServiceStub],
                 requests: Iterable[pb.CreateJobsRequest], in_flight: int,
                 progress: Callable[[int], None] | None = None) -> list[str]:
    """Sends each CreateJobs call, `in_flight` at once, taking the stubs (one per api
    process) in turn; returns the items' errors. `progress` gets the items answered so far,
    after each call."""
    failed: list[str] = []
    answered = 0

    def call(stub: pb_grpc.JobServiceStub, request: pb.CreateJobsRequest) -> int:
        try:
            results = stub.CreateJobs(request, timeout=120).results
        except grpc.RpcError as exc:
            # A call that fails as a whole (its deadline passed on an overloaded machine)
            # fails its items, not the measurement: the figures say how many.
            failed.extend(f"{exc.code().name}: the whole call failed"
                          for _ in request.items)
            return len(request.items)
        failed.extend(f"{r.error.code}: {r.error.message}" for r in results
                      if r.HasField("error"))
        return len(results)

    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        pending: deque[Future[int]] = deque()
        for n, request in enumerate(requests):
            pending.append(pool.submit(call, stubs[n % len(stubs)], request))
            while len(pending) >= in_flight:
                answered += pending.popleft().result()
                if progress is not None:
                    progress(answered)
        while pending:
            answered += pending.popleft().result()
            if progress is not None:
                progress(answered)
    return failed


def stored_jobs(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    return int(row[0]) if row else 0


def measure(args: argparse.Namespace, state_root: Path) -> dict[str, Any]:
    settings, tag = _isolated(settings_from_env(), args.partitions,
                              args.kafka_partitions or None)
    log_dir = state_root / "bench" / "logs" / tag
    provision(settings)
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        processes["api"] = spawn_role("api", settings, log_dir,
                                      {"CRONLOG_API_METRICS_PORT": "0"})
        for n in range(1, args.schedulers + 1):
            processes[f"scheduler-{n}"] = spawn_role(
                "scheduler", settings, log_dir / f"scheduler-{n}",
                {"CRONLOG_INSTANCE_ID": f"{tag}-scheduler-{n}",
                 "CRONLOG_SCHEDULER_METRICS_PORT": "0"})
        channel = grpc.insecure_channel(settings.grpc_address)
        wait_serving(channel, processes, 120)
        stub = pb_grpc.JobServiceStub(channel)
        requests = _batches(args.jobs, args.batch_size, args.tenants, tag)
        say(f"bulk-create: {args.jobs} jobs in {len(requests)} calls of {args.batch_size}, "
            f"{args.in_flight} in flight, {args.schedulers} schedulers, "
            f"{args.partitions} partitions over {settings.layout.kafka} Kafka partitions; "
            f"load average {os.getloadavg()[0]:.1f}")
        spies = []
        if args.profile:
            guess = max(5.0, args.jobs / 2000)
            spies = [p for p in (_profile(processes[name].pid, log_dir / f"{name}.speedscope",
                                          guess, args.profile == "wall")
                                 for name in ("api", "scheduler-1")) if p]
        cpu_before = cpu_seconds(processes)
        load_before = os.getloadavg()[0]
        began = time.monotonic()
        failed = send_batches([stub], requests, args.in_flight)
        answered = time.monotonic() - began
        cpu_answered = cpu_seconds(processes)
        while stored_jobs(settings.postgres_dsn) < args.jobs - len(failed):
            if time.monotonic() - began > answered + 120:
                break
            time.sleep(0.05)
        stored = time.monotonic() - began
        for spy in spies:
            spy.wait(60)
        channel.close()
        figures = {
            "jobs": args.jobs, "failed": len(failed), "first_failures": failed[:5],
            "batch_size": args.batch_size, "in_flight": args.in_flight,
            "schedulers": args.schedulers, "partitions": args.partitions,
            "kafka_partitions": settings.layout.kafka,
            "answered_seconds": round(answered, 2),
            "jobs_per_second_answered": round(args.jobs / answered),
            "stored_seconds": round(stored, 2),
            "jobs_per_second_stored": round(args.jobs / stored),
            "cpu_seconds_until_answered": {
                name: round(cpu_answered[name] - cpu_before[name], 2) for name in processes},
            "load_average_before": round(load_before, 2),
            "load_average_after": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(),
            "profiles": [str(log_dir / f"{n}.speedscope") for n in ("api", "scheduler-1")]
            if spies else [],
        }
        return figures
    finally:
        stop_all(list(processes.values()))
        server = settings.postgres_dsn.rsplit("/", 1)[0]
        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{tag}" WITH (FORCE)')


def run_bulk_create(args: argparse.Namespace, state_root: Path) -> int:
    figures = measure(args, state_root)
    text = json.dumps(figures, indent=2)
    print(text, flush=True)
    if args.output:
        Path(args.output).write_text(text + "\n")
    return 1 if figures["failed"] else 0
