"""Session fixtures: the real servers start once per test session (or are reused when the
environment names running ones); each test gets its own topics and databases."""

from __future__ import annotations

import faulthandler
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, TypeVar

import pytest
from hypothesis import settings

from tests.support.examples import examples
from tests.support.polling import patience

ROOT = Path(__file__).resolve().parent.parent

# Property tests draw the same examples every run, so `make test` (and CI) cannot pass on
# one run and fail on the next; to explore further, run them with `--hypothesis-seed=N` or
# HYPOTHESIS_PROFILE=explore.
# Tests that name no count draw Hypothesis's 100, scaled like the others (support/examples.py).
settings.register_profile("cronlog", derandomize=True, max_examples=examples(100))
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "cronlog"))


@pytest.fixture(autouse=True)
def hypothesis_literals_pinned(request: pytest.FixtureRequest) -> Iterator[None]:
    """A property test draws the same examples alone, in its folder or in `make test`: the
    seed is fixed (above), and the literals Hypothesis mixes into its draws are those of the
    code under test only, not of every module the session happened to import before
    (tests/unit/projections/pinned_constants.py)."""
    if not getattr(getattr(request.node, "obj", None), "is_hypothesis_test", False):
        yield
        return
    from tests.unit.projections.pinned_constants import constants_of, modules_under_test

    with constants_of(*modules_under_test(request.module)):
        yield


# Longer than any test takes, starved included: past it a test is hung, not slow.
TEST_HANG_SECONDS = 10 * 60


@pytest.fixture(autouse=True)
def hang_ends_the_session() -> Iterator[None]:
    """A hung test ends its session with every thread's traceback on stderr, rather than
    holding `make test` until CI's own time limit: a Kafka consumer left open by a failed
    test, collected during a later one, once waited forever in rd_kafka_destroy, in C code
    where nothing in Python can interrupt it. faulthandler's timer thread needs no GIL."""
    faulthandler.dump_traceback_later(TEST_HANG_SECONDS * patience(), exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


class _Servers(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


S = TypeVar("S", bound=_Servers)


def _port_offset() -> int:
    # CRONLOG_TEST_PORT_OFFSET lets a second test session run beside the first.
    return int(os.environ.get("CRONLOG_TEST_PORT_OFFSET", "0"))


def _kafka_optimising_jit() -> bool:
    """CRONLOG_TEST_KAFKA_JIT=optimising: this session's brokers compile with C2 too, as a
    deployed broker does (the measured modules' session: scripts/test-suites.sh); by
    default C1 alone, which costs a test session far less CPU (kafka_broker.QUICK_JIT)."""
    return os.environ.get("CRONLOG_TEST_KAFKA_JIT", "") == "optimising"


def _state_dir(name: str, offset: int) -> Path:
    return ROOT / ".cronlog" / (name if not offset else f"{name}-{offset}")


def _started_afresh(servers: S, state: Path) -> Iterator[S]:
    """The servers started on an empty state folder, and stopped after."""
    servers.stop()  # a crashed earlier session may have left servers behind
    shutil.rmtree(state, ignore_errors=True)
    servers.start()
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture(scope="session")
def local_stack() -> Iterator[object | None]:
    """The servers this session started, or None when the environment names running ones."""
    from cronlog_dev.stack.local_stack import TEST_PORTS, LocalStack, shifted

    if os.environ.get("CRONLOG_TEST_KAFKA_BOOTSTRAP"):
        yield None
        return
    offset = _port_offset()
    state = _state_dir("test-stack", offset)
    yield from _started_afresh(LocalStack(state, shifted(TEST_PORTS, offset), partitions=4,
                                          kafka_optimising_jit=_kafka_optimising_jit()),
                               state)


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[object]:
    """A 3-node KRaft cluster of this session's own, on ports of its own, for the tests
    that kill brokers; started even when the environment names a running stack."""
    from cronlog_dev.stack.kafka_cluster import KafkaCluster
    from cronlog_dev.stack.local_stack import (
        TEST_CLUSTER_CONTROLLER_PORT,
        TEST_CLUSTER_KAFKA_PORT,
    )

    offset = _port_offset()
    state = _state_dir("test-cluster", offset)
    yield from _started_afresh(KafkaCluster(state, TEST_CLUSTER_KAFKA_PORT + offset,
                                            TEST_CLUSTER_CONTROLLER_PORT + offset, brokers=3,
                                            partitions=4,
                                            optimising_jit=_kafka_optimising_jit()), state)


@pytest.fixture(scope="session")
def stack_settings(local_stack: object | None) -> object:
    from cronlog.infra.config import Settings

    if local_stack is None:
        from cronlog_dev.stack.secrets import stack_key_file

        env = os.environ
        # Servers of the environment's, but a signing key of the session's own (issue 37),
        # as a local stack makes one.
        key = stack_key_file(_state_dir("test-stack", _port_offset()))
        return Settings(
            alert_signing_key_file=str(key), alert_signing_key=key.read_bytes(),
            kafka_bootstrap=env["CRONLOG_TEST_KAFKA_BOOTSTRAP"],
            postgres_dsn=env["CRONLOG_TEST_POSTGRES_DSN"],
            clickhouse_host=env.get("CRONLOG_TEST_CLICKHOUSE_HOST", "127.0.0.1"),
            clickhouse_port=int(env.get("CRONLOG_TEST_CLICKHOUSE_PORT", "9000")),
            clickhouse_user=env.get("CRONLOG_TEST_CLICKHOUSE_USER", "default"),
            clickhouse_password=env.get("CRONLOG_TEST_CLICKHOUSE_PASSWORD", ""),
            partitions=int(env.get("CRONLOG_TEST_PARTITIONS", "4")),
        )
    return local_stack.settings()  # type: ignore[attr-defined]


# A database with cronlog's schema, per server and partition count, made once a session:
# each isolated database is a copy of it. Copying took a tenth of the time ensure_schema
# took (0.08 s against 0.4-0.6 s on this machine), for each of a few hundred tests.
_SCHEMA_TEMPLATES: dict[tuple[str, int], str] = {}


def _schema_template(server_dsn: str, partitions: int) -> str:
    import psycopg

    from cronlog.infra.postgres.connection import ensure_schema

    name = _SCHEMA_TEMPLATES.get((server_dsn, partitions))
    if name is None:
        name = "schema_" + uuid.uuid4().hex[:10]
        with psycopg.connect(f"{server_dsn}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        ensure_schema(f"{server_dsn}/{name}", partitions)
        _SCHEMA_TEMPLATES[(server_dsn, partitions)] = name
    return name


def make_isolated(stack_settings: object) -> object:
    """Settings of the shared stack with their own topic prefix and databases (the
    Postgres one with cronlog's schema, as ensure_schema makes it)."""
    import psycopg

    from cronlog.infra.config import Settings

    assert isinstance(stack_settings, Settings)
    tag = "t" + uuid.uuid4().hex[:10]
    server_dsn = stack_settings.postgres_dsn.rsplit("/", 1)[0]
    template = _schema_template(server_dsn, stack_settings.partitions)
    with psycopg.connect(f"{server_dsn}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{tag}" TEMPLATE "{template}"')
    return stack_settings.with_overrides(
        topic_prefix=f"{tag}.",
        postgres_dsn=f"{server_dsn}/{tag}",
        clickhouse_database=tag,
        instance_id=f"{tag}-scheduler",
        worker_id=f"{tag}-worker",
    )


@pytest.fixture
def isolated(stack_settings: object) -> object:
    return make_isolated(stack_settings)


# How long each suite took (wall time of its tests, fixtures included), printed at the end
# of a session and kept in .cronlog/test-output/suite-times.txt: `make test` must stay under
# 30 minutes, and this says where the time goes.
_SUITE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    parts = Path(report.fspath).parts
    suite = parts[parts.index("tests") + 1] if "tests" in parts[:-1] else "other"
    _SUITE_SECONDS[suite] = _SUITE_SECONDS.get(suite, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _SUITE_SECONDS:
        return
    lines = [f"{suite:<12} {int(seconds // 60):3d}:{int(seconds % 60):02d}"
             for suite, seconds in sorted(_SUITE_SECONDS.items(), key=lambda s: -s[1])]
    terminalreporter.write_sep("-", "time by suite")
    for line in lines:
        terminalreporter.write_line(line)
    out = ROOT / ".cronlog" / "test-output"
    out.mkdir(parents=True, exist_ok=True)
    # make test runs sessions side by side (scripts/test-suites.sh): each keeps its own.
    stream = os.environ.get("CRONLOG_TEST_STREAM", "")
    name = f"suite-times-{stream}.txt" if stream else "suite-times.txt"
    (out / name).write_text("\n".join(lines) + "\n")
