"""cronlog.sdk handlers as a worker loads and runs them (worker/user_handlers.py,
worker/sdk_adapter.py), and the NonRetryable rule of the retry policy."""

from __future__ import annotations

import importlib.metadata
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.domain.policies import NON_RETRYABLE, RetryPolicy
from cronlog.domain.run_states import error_type_of
from cronlog.infra.config import ConfigError
from cronlog.infra.config_handlers import worker_handlers_from
from cronlog.sdk import ENTRY_POINT_GROUP, handler, handler_name
from cronlog.worker.execution import invoke
from cronlog.worker.handler_context import HandlerContext
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.user_handlers import HandlerLoadError, load_user_handlers

JOBS = "tests.unit.sdk.sample_handlers.jobs"
NOW = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
BUILT_IN = HandlerRegistry().names()


def context(payload: bytes = b"", attempt: int = 1) -> HandlerContext:
    return HandlerContext(run_id=uuid4(), job_id=uuid4(), attempt=attempt,
                          idempotency_key="key", payload=payload, scheduled_at=NOW,
                          timeout_seconds=30.0)


def no_entry_points() -> list[importlib.metadata.EntryPoint]:
    return []


def loaded(*specs: str) -> HandlerRegistry:
    registry = HandlerRegistry()
    for name, found in load_user_handlers(specs, BUILT_IN, no_entry_points).items():
        registry.register(name, found)
    return registry


def run(registry: HandlerRegistry, name: str, payload: bytes = b"",
        ctx: HandlerContext | None = None) -> tuple[str, bytes, str | None]:
    return invoke(registry, {"handler": name}, ctx or context(payload))


def test_a_module_gives_every_handler_in_it_and_each_runs() -> None:
    registry = loaded(JOBS)
    assert {"sample.greet", "sample.wait", "sample.give_up"} <= set(registry.names())
    assert "not_a_handler" not in registry
    outcome, output, error = run(registry, "sample.greet", b'{"name": "ops"}')
    assert (outcome, error) == ("succeeded", None)
    assert json.loads(output) == {"hello": "ops", "attempt": 1}
    assert run(registry, "sample.wait", b'{"seconds": 0.01}')[:2] == ("succeeded", b"waited")


def test_an_attribute_gives_one_handler() -> None:
    registry = loaded(JOBS + ":greet")
    assert set(registry.names()) - set(BUILT_IN) == {"sample.greet"}


def test_non_retryable_ends_the_run_and_other_failures_follow_the_policy() -> None:
    registry = loaded(JOBS)
    outcome, _, error = run(registry, "sample.give_up")
    assert outcome == "failed" and error == f"{NON_RETRYABLE}: the target does not exist"
    policy = RetryPolicy(max_attempts=5)
    assert error is not None and not policy.retries(1, error_type_of(error))
    assert policy.retries(1, "ValueError")
    bad_json = run(registry, "sample.greet", b"{not json")
    assert bad_json[0] == "failed" and bad_json[2] is not None
    assert bad_json[2].startswith(f"{NON_RETRYABLE}: the payload is not JSON")
    odd = run(registry, "sample.odd_output")
    assert odd[0] == "failed" and odd[2] is not None and odd[2].startswith("OutputError: ")


def test_an_async_handler_is_cancelled_with_its_attempt() -> None:
    registry = loaded(JOBS)
    ctx = context(b'{"seconds": 30}')
    threading.Timer(0.1, ctx.cancelled.set).start()
    started = time.monotonic()
    outcome, _, error = run(registry, "sample.wait", ctx=ctx)
    assert outcome == "failed" and error == "Cancelled: cancelled"
    assert time.monotonic() - started < 5


def test_the_context_carries_the_run_and_its_deadline() -> None:
    from tests.unit.sdk.sample_handlers.jobs import SEEN

    registry = loaded(JOBS + ":probe")
    ctx = context(b"x", attempt=3)
    SEEN.clear()
    assert run(registry, "sample.probe", ctx=ctx) == ("succeeded", b"", None)
    (given,) = SEEN
    assert (given.run_id, given.job_id, given.attempt, given.payload) == (
        ctx.run_id, ctx.job_id, 3, b"x")
    assert given.idempotency_key == "key" and given.scheduled_at == NOW
    assert given.cancelled is ctx.cancelled
    assert timedelta(seconds=25) < given.deadline - datetime.now(UTC) <= timedelta(seconds=30)


def _point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def test_entry_points_and_the_setting_naming_one_function_load_it_once() -> None:
    found = load_user_handlers([JOBS], BUILT_IN,
                               lambda: [_point("greet", f"{JOBS}:greet"), _point("all", JOBS)])
    assert "sample.greet" in found and "sample.odd_output" in found


@pytest.mark.parametrize(("specs", "points", "says"), [
    (["tests.unit.sdk.no_such_module"], [], "cannot be imported: ModuleNotFoundError"),
    ([JOBS + ":missing"], [], "has no 'missing'"),
    ([JOBS + ":not_a_handler"], [], "neither a @handler function nor a module"),
    (["tests.unit.sdk.sample_handlers.empty"], [], "has no @handler functions"),
    ([JOBS, "tests.unit.sdk.sample_handlers.clash"], [], "two handlers are named 'sample.greet'"),
    ([], [_point("broken", "tests.unit.sdk.no_such_module:x")], "entry point 'broken'"),
])
def test_what_cannot_be_loaded_stops_the_worker_saying_why(
        specs: list[str], points: list[importlib.metadata.EntryPoint], says: str) -> None:
    with pytest.raises(HandlerLoadError, match=says):
        load_user_handlers(specs, BUILT_IN, lambda: points)


def test_a_handler_named_like_a_built_in_one_is_refused() -> None:
    with pytest.raises(HandlerLoadError, match="name of a built-in handler"):
        load_user_handlers(["tests.unit.sdk.sample_handlers.builtin_clash"], BUILT_IN,
                           no_entry_points)


def test_names_and_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="must match"):
        handler("has space")
    assert handler_name(test_names_and_settings_are_checked) is None
    assert worker_handlers_from(" a.b , c:d ,") == ("a.b", "c:d")
    with pytest.raises(ConfigError, match="CRONLOG_WORKER_HANDLERS: 'a b'"):
        worker_handlers_from("a b")
    with pytest.raises(ConfigError, match="--handlers"):
        worker_handlers_from("x:y:z", "--handlers")

