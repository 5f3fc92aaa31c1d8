"""The bench's own servers, beside those of `make run` and `make test`, and one isolated
set of topics and databases per workload."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

import psycopg

from cronlog.domain.limits import TenantLimit, TenantLimits
from cronlog.infra.config import Settings
from cronlog_dev.stack.local_stack import TEST_PORTS, LocalStack, StackPorts, shifted

# The test suite uses TEST_PORTS and offsets of them up to a few hundred for parallel
# sessions; 300 keeps the bench clear of both the tests and `make run`.
BENCH_PORTS: StackPorts = shifted(TEST_PORTS, 300)
# Moves the bench's ports by this much more, for a bench beside a test session that took
# the 300 offset (CRONLOG_BENCH_PORT_OFFSET=400 puts Kafka on 49492); give such a bench a
# state folder of its own too (CRONLOG_STATE_DIR): a fresh start stops what is in it.
PORT_OFFSET_VARIABLE = "CRONLOG_BENCH_PORT_OFFSET"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,40}")
# The bench loads a single tenant far beyond the per-tenant guard rails, on purpose.
UNLIMITED = TenantLimits(TenantLimit(max_jobs=1_000_000_000, max_in_flight=1_000_000_000))
# The api's per-tenant rates out of a measurement's way: it measures what the service does.
UNLIMITED_RATES: dict[str, object] = dict(
    tenant_command_rate=1e9, tenant_command_burst=1_000_000_000,
    tenant_read_rate=1e9, tenant_read_burst=1_000_000_000)


# The bench's broker may hold deployments of 1,024 partitions a topic (scale, or
# --partitions 1024 with the warm-up): with two of them, 768 MB (the test stack's heap) left
# its old generation 85-99 % full of live per-partition state and metrics, and G1 ran all
# the time (docs/benchmarks.md, "Scale (issue 19)").
BENCH_KAFKA_HEAP_MB = 3072


def bench_ports(environ: dict[str, str] | None = None) -> StackPorts:
    """BENCH_PORTS, moved by CRONLOG_BENCH_PORT_OFFSET when it is set."""
    raw = (os.environ if environ is None else environ).get(PORT_OFFSET_VARIABLE, "").strip()
    try:
        offset = int(raw or "0")
    except ValueError:
        raise SystemExit(f"{PORT_OFFSET_VARIABLE}: expected a whole number, got {raw!r}") from None
    return shifted(BENCH_PORTS, offset)


def bench_stack(state_root: Path, partitions: int) -> LocalStack:
    return LocalStack(state_root / "bench" / "stack", bench_ports(), partitions=partitions,
                      kafka_heap_mb=BENCH_KAFKA_HEAP_MB, kafka_optimising_jit=True)


def fresh_start(stack: LocalStack) -> None:
    """Stops servers a crashed earlier bench left behind and starts empty ones."""
    stack.stop()
    shutil.rmtree(stack.state_dir, ignore_errors=True)
    stack.start()


def unique_name(prefix: str) -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a usable database name: {name!r}")
    return name


def dsn_of(base_dsn: str, database: str) -> str:
    return base_dsn.rsplit("/", 1)[0] + f"/{database}"


def create_database(base_dsn: str, database: str) -> str:
    """Creates an empty database on the server of base_dsn; returns its DSN."""
    if not _NAME.fullmatch(database):
        raise ValueError(f"not a usable database name: {database!r}")
    with psycopg.connect(dsn_of(base_dsn, "postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"'.encode())
    return dsn_of(base_dsn, database)


def isolated_settings(base: Settings, workload: str, worker_slots: int) -> Settings:
    """Settings with their own topic prefix, Postgres database and ClickHouse database."""
    tag = unique_name(f"cl_{workload}")
    return base.with_overrides(
        topic_prefix=f"{tag}.",
        postgres_dsn=create_database(base.postgres_dsn, tag),
        clickhouse_database=tag,
        instance_id=f"{tag}-scheduler",
        worker_id=f"{tag}-worker",
        worker_slots=worker_slots,
        tenant_limits=UNLIMITED,
        **UNLIMITED_RATES,
    )
