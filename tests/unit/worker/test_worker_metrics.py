"""What a worker tells its metrics port: each start's lag and late cause (the same numbers
as its 10 s log line), each handler's duration by handler and outcome, cancelled attempts,
and its slots and held dispatches when looked at."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import timedelta
from uuid import uuid4

from cronlog.ports import InboundMessage
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.runtime import Occupancy, WorkerRuntime
from cronlog.worker.start_lateness import StartLateness
from tests.support.clock import FakeClock
from tests.support.polling import after_each, wait_for
from tests.support.worker_transport import T0, Sink, Source, dispatch


@dataclass
class Recorded:
    starts: list[tuple[float, str | None]] = field(default_factory=list)
    finished: list[tuple[str, str]] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    lost: list[tuple[str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run_started(self, lag_seconds: float, late_cause: str | None) -> None:
        self.starts.append((lag_seconds, late_cause))

    def handler_finished(self, handler: str, outcome: str, seconds: float) -> None:
        with self.lock:
            self.finished.append((handler, outcome))
            self.durations.append(seconds)

    def attempt_cancelled(self, stage: str) -> None:
        self.cancelled.append(stage)

    def attempts_lost(self, reason: str, count: int) -> None:
        self.lost.append((reason, count))


def test_start_lag_and_its_cause_feed_the_metrics_and_the_log_line_alike() -> None:
    metrics = Recorded()
    lateness = StartLateness(metrics=metrics)
    lateness.report(T0)
    lateness.started(T0, T0 - timedelta(seconds=1), T0 + timedelta(milliseconds=100))
    lateness.started(T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=2))
    lateness.started(T0, T0 - timedelta(seconds=1), T0 + timedelta(seconds=3))
    assert metrics.starts == [(0.1, None), (2.0, "arrived_late"), (3.0, "waited_here")]
    line = lateness.report(T0 + timedelta(seconds=10))
    assert line is not None and line.startswith("2 of 3 starts")
    assert "1 reached this worker after their due time, 1 waited here" in line


def test_handler_outcomes_are_labelled_and_unregistered_names_are_unknown() -> None:
    clock, source, sink, metrics = FakeClock(T0), Source(), Sink(), Recorded()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=2,
                           metrics=metrics)
    failing = dispatch(1, T0, handler="fail", payload=b'{"times": 1}')
    source.messages = [dispatch(0, T0), failing, dispatch(2, T0, handler=f"x-{uuid4()}")]
    clock.at = T0 + timedelta(milliseconds=250)
    worker.step()
    worker.step()
    wait_for(lambda: len(metrics.finished) == 3, 5, "three handlers finished")
    assert sorted(metrics.finished) == [("echo", "succeeded"), ("fail", "failed"),
                                        ("unknown", "failed")]
    assert [lag for lag, _ in metrics.starts] == [0.25, 0.25, 0.25]
    assert all(d >= 0 for d in metrics.durations)


def cancel(message: InboundMessage, offset: int) -> InboundMessage:
    return InboundMessage("dispatch.q", 0, offset, "CancelAttempt", {
        "run_id": message.record["run_id"], "attempt": 1, "reason": "paused"}, b"")


def test_cancelled_attempts_count_by_stage_and_a_cancelled_handler_is_labelled_so() -> None:
    clock, source, sink, metrics = FakeClock(T0), Source(), Sink(), Recorded()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=2,
                           metrics=metrics)
    running = dispatch(0, T0, handler="sleep", payload=b'{"seconds": 30}', timeout_ms=60_000)
    held = dispatch(1, T0 + timedelta(seconds=30))
    source.messages = [running, held]
    worker.step()
    assert worker.occupancy() == Occupancy(busy_slots=1, free_slots=1, held=1,
                                           busy_by_tenant={"t": 1}, tenant_share=0.5)
    source.messages = [cancel(held, 2), cancel(running, 3)]
    worker.step()
    assert metrics.cancelled == ["held", "running"]
    wait_for(lambda: metrics.finished, 5, "the cancelled handler to end")
    assert metrics.finished == [("sleep", "cancelled")]
    wait_for(after_each(worker.step, lambda: worker.occupancy() == Occupancy(0, 2, 0)), 5,
             "every slot free again")


def test_a_handler_past_its_timeout_is_labelled_timed_out() -> None:
    clock, source, sink, metrics = FakeClock(T0), Source(), Sink(), Recorded()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=1,
                           metrics=metrics)
    slow = dispatch(0, T0, handler="sleep", payload=b'{"seconds": 30}')
    source.messages = [slow]  # timeout 1 s
    worker.step()
    clock.at = T0 + timedelta(seconds=2)
    worker.step()
    wait_for(lambda: metrics.finished, 5, "the handler to end")
    assert metrics.finished == [("sleep", "timed_out")]


def test_the_registry_knows_its_names() -> None:
    registry = HandlerRegistry()
    registry.register("mine", lambda ctx: b"")
    assert "mine" in registry and "echo" in registry and "theirs" not in registry


def test_no_metrics_is_the_default() -> None:
    clock, source, sink = FakeClock(T0), Source(), Sink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=1)
    source.messages = [dispatch(0, T0)]
    worker.step()
    wait_for(lambda: len(sink.sent) == 2, 5, "reports without a metrics port")


def test_slots_by_tenant_name_the_top_tenants_and_the_rest_as_other() -> None:
    from prometheus_client import generate_latest

    from cronlog.infra.observability.catalogue import IN_FLIGHT_TOP_TENANTS
    from cronlog.infra.observability.registry import RoleMetrics
    from cronlog.infra.observability.worker import QueueProbes, WorkerObservation

    busy = {f"t{n:02d}": n + 1 for n in range(IN_FLIGHT_TOP_TENANTS + 5)}
    look = Occupancy(sum(busy.values()), 0, 3, busy, 0.25)
    observation = WorkerObservation(RoleMetrics("worker", default_collectors=False))
    observation.watch("default", QueueProbes(lambda: look, lambda: frozenset({0}), lambda: 0))
    text = generate_latest(observation.metrics.registry).decode()
    lines = [line for line in text.splitlines()
             if line.startswith("cronlog_worker_tenant_busy_slots{")]
    assert len(lines) == IN_FLIGHT_TOP_TENANTS + 1
    assert 'cronlog_worker_tenant_busy_slots{queue="default",tenant="t24"} 25.0' in lines
    assert 'cronlog_worker_tenant_busy_slots{queue="default",tenant="t04"} 5.0' not in lines
    assert 'cronlog_worker_tenant_busy_slots{queue="default",tenant="other"} 15.0' in lines
    assert 'cronlog_worker_tenant_share_ratio{queue="default"} 0.25' in text


def test_an_idle_worker_counts_no_tenants_slots_and_tells_its_share() -> None:
    clock, source, sink = FakeClock(T0), Source(), Sink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=2,
                           tenant_share=0.75)
    look = worker.occupancy()
    assert look.busy_by_tenant == {} and look.tenant_share == 0.75
