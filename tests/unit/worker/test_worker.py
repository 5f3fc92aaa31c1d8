from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest

from cronlog.ports import InboundMessage
from cronlog.worker.built_in_handlers import fail as fail_handler
from cronlog.worker.built_in_handlers import sleep as sleep_handler
from cronlog.worker.execution import MAX_OUTPUT_BYTES, bound_output
from cronlog.worker.handler_context import HandlerContext, HandlerFailed, UnknownHandler
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.offsets import OffsetTracker
from cronlog.worker.ports import ReportsNotDelivered
from cronlog.worker.runtime import REPORT_HOLD, REPORT_SHIP_WAIT, WorkerRuntime
from tests.support.clock import FakeClock
from tests.support.polling import after_each, wait_for
from tests.support.worker_transport import T0, Sink, Source, dispatch


def ctx(payload: bytes, attempt: int = 1) -> HandlerContext:
    return HandlerContext(run_id=uuid4(), job_id=uuid4(), attempt=attempt, idempotency_key="k",
                          payload=payload, scheduled_at=T0, timeout_seconds=1.0)


def test_offsets_commit_only_past_started_or_dropped_dispatches() -> None:
    tracker = OffsetTracker()
    for offset in (10, 11, 12):
        tracker.received(0, offset)
    assert tracker.committable() == {0: 10}
    tracker.settled(0, 11)
    assert tracker.committable() == {0: 10}
    tracker.settled(0, 10)
    assert tracker.committable() == {0: 12}
    tracker.settled(0, 12)
    assert tracker.committable() == {0: 13}


def test_offsets_arriving_out_of_order_or_again_keep_the_lowest_open_one() -> None:
    tracker = OffsetTracker()
    for offset in (20, 14, 17):
        tracker.received(1, offset)
    assert tracker.committable() == {1: 14}
    tracker.settled(1, 14)
    assert tracker.committable() == {1: 17}
    tracker.received(1, 14)  # delivered again after it was settled: open again
    assert tracker.committable() == {1: 14}
    tracker.settled(1, 14)
    tracker.settled(1, 17)
    tracker.settled(1, 20)
    assert tracker.committable() == {1: 21}
    tracker.forget(1)
    assert tracker.committable() == {}
    tracker.received(1, 3)  # the partition back, from an older committed offset
    assert tracker.committable() == {1: 3}


def test_a_contexts_cancellation_event_is_made_once_even_when_threads_race_for_it() -> None:
    context = ctx(b"")
    seen: list[threading.Event] = []
    threads = [threading.Thread(target=lambda: seen.append(context.cancelled))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(event) for event in seen}) == 1
    assert context.cancelled is seen[0] and not context.cancelled.is_set()


def test_fail_handler_fails_the_first_n_attempts() -> None:
    payload = json.dumps({"times": 2}).encode()
    for attempt in (1, 2):
        with pytest.raises(HandlerFailed):
            fail_handler(ctx(payload, attempt))
    assert b"3" in fail_handler(ctx(payload, 3))


def test_sleep_handler_checks_its_payload_and_can_be_cancelled() -> None:
    with pytest.raises(HandlerFailed, match="seconds"):
        sleep_handler(ctx(b'{"seconds": -1}'))
    context = ctx(b'{"seconds": 30}')
    context.cancelled.set()
    with pytest.raises(HandlerFailed, match="cancelled"):
        sleep_handler(context)


def test_registry_knows_built_ins_and_custom_handlers() -> None:
    registry = HandlerRegistry()
    assert {"echo", "sleep", "fail", "http"} <= set(registry.names())
    registry.register("mine", lambda c: b"mine")
    assert registry.get("mine")(ctx(b"")) == b"mine"
    with pytest.raises(UnknownHandler):
        registry.get("nope")


def test_output_is_bounded_with_a_flag() -> None:
    assert bound_output(b"x") == (b"x", False)
    data, truncated = bound_output(b"x" * (MAX_OUTPUT_BYTES + 5))
    assert len(data) == MAX_OUTPUT_BYTES and truncated


def test_worker_holds_a_dispatch_until_due_then_runs_and_reports() -> None:
    clock, source, sink = FakeClock(T0), Source(), Sink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=2)
    held = dispatch(5, T0 + timedelta(seconds=2))
    source.messages = [held]
    worker.step()
    assert sink.sent == []
    assert sink.prepared == [str(held.record["job_id"])], "told of the key on arrival"
    assert source.commits == [{0: 5}]  # nothing started: the group may hand it elsewhere
    clock.at = T0 + timedelta(seconds=2)
    worker.step()
    wait_for(lambda: len(sink.sent) == 2, 5, "start and finish reports")
    (start_name, start), (finish_name, finish) = sink.sent
    assert start_name == "AttemptStartedReport" and start["started_at"] == clock.at
    assert finish_name == "AttemptFinishedReport" and finish["outcome"] == "succeeded"
    assert finish["output"] == b"hi"
    assert source.commits[-1] == {0: 5}, "started in this step: its start is not out yet"
    clock.at += timedelta(seconds=1)
    worker.step()
    assert source.commits[-1] == {0: 6}, "committed once the next step shipped its start"


def test_a_failing_handler_is_reported_as_a_failed_attempt() -> None:
    clock, source, sink = FakeClock(T0), Source(), Sink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=1)
    source.messages = [dispatch(0, T0, handler="nope")]
    worker.step()
    wait_for(lambda: len(sink.sent) == 2, 5, "reports")
    assert sink.sent[1][1]["outcome"] == "failed"
    assert "UnknownHandler" in sink.sent[1][1]["error"]


def test_running_attempts_heartbeat_and_revoked_dispatches_are_dropped() -> None:
    clock, source, sink = FakeClock(T0), Source(), Sink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=2,
                           heartbeat_interval=timedelta(seconds=1))
    slow = dispatch(0, T0, handler="sleep", payload=b'{"seconds": 0.5}', timeout_ms=60_000)
    later = InboundMessage("dispatch.q", 1, 7, "Dispatch",
                           {**dispatch(7, T0 + timedelta(seconds=30)).record}, b"")
    source.messages = [slow, later]
    worker.step()
    clock.at = T0 + timedelta(seconds=1)
    worker.step()
    beats = [r for n, r in sink.sent if n == "HeartbeatReport"]
    assert len(beats) == 1 and beats[0]["attempt"] == 1
    source.revoke([1])
    clock.at = T0 + timedelta(seconds=31)
    worker.step()
    started = [r for n, r in sink.sent if n == "AttemptStartedReport"]
    assert len(started) == 1, "the revoked partition's dispatch was not started here"
    wait_for(lambda: any(n == "AttemptFinishedReport" for n, _ in sink.sent), 5, "finish")


def test_a_handler_past_its_timeout_is_told_then_stopped_and_left_to_the_owner() -> None:
    clock, source, sink = FakeClock(T0), Source(), Sink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=1,
                           cancel_grace=timedelta(seconds=1))
    told = threading.Event()

    def stubborn(ctx: HandlerContext) -> bytes:
        while True:  # ignores being told; only the forced stop ends it
            if ctx.cancelled.is_set():
                told.set()
            time.sleep(0.01)

    worker._handlers.register("stubborn", stubborn)
    source.messages = [dispatch(0, T0, handler="stubborn")]  # timeout 1 s
    worker.step()
    clock.at = T0 + timedelta(seconds=2)
    worker.step()
    wait_for(told.is_set, 5, "the handler told to stop")
    clock.at = T0 + timedelta(seconds=4)
    worker.step()
    wait_for(lambda: not worker._running, 5, "the handler stopped by force")
    assert [n for n, _ in sink.sent] == ["AttemptStartedReport"], \
        "a stopped handler is not reported: the owner times the attempt out"


@dataclass
class UnacknowledgedSink(Sink):
    """Its flush fails (the broker is away) until told otherwise."""

    acknowledged: bool = False

    def flush(self, timeout: float) -> None:
        if not self.acknowledged:
            raise ReportsNotDelivered("1 reports still queued")


@dataclass
class ShipCountingSink(Sink):
    ships: int = 0

    def ship(self) -> None:
        self.ships += 1


def test_reports_wait_while_due_runs_wait_for_a_slot_but_no_longer_than_the_hold() -> None:
    clock, source, sink = FakeClock(T0), Source(), ShipCountingSink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=1)
    release = threading.Event()

    def blocking(ctx: HandlerContext) -> bytes:
        release.wait(10)
        return b""

    worker._handlers.register("blocking", blocking)
    source.messages = [dispatch(0, T0, handler="blocking"), dispatch(1, T0)]
    worker.step()  # starts the first; the second is due and waits for the only slot
    assert [n for n, _ in sink.sent] == ["AttemptStartedReport"]
    assert sink.ships == 0 and source.commits == [], "reports went out while a run waited"
    clock.at = T0 + REPORT_HOLD - timedelta(milliseconds=1)
    worker.step()
    assert sink.ships == 0 and source.commits == []
    clock.at = T0 + REPORT_HOLD
    worker.step()
    assert sink.ships == 1, "held longer than REPORT_HOLD"
    assert source.commits == [{0: 1}], "the started dispatch is committed, the waiting one not"
    release.set()
    clock.at = T0 + REPORT_HOLD + timedelta(seconds=1)
    wait_for(after_each(worker.step, lambda: len(sink.sent) == 4), 5,
             "the second run started once the slot was free, and both finished")
    ships = sink.ships
    worker.step()
    assert sink.ships == ships + 1, "nothing due and waiting: reports go out every time round"
    assert source.commits[-1] == {0: 2}


@dataclass
class GatheringSink(Sink):
    """Gathers reports until ship(), as the Kafka sink does; remembers what each ship sent."""

    shipped: list[list[str]] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    def send(self, key: str, name: str, record: Mapping[str, Any]) -> None:
        super().send(key, name, record)
        with self.lock:
            self.pending.append(name)

    @property
    def gathered(self) -> int:
        with self.lock:
            return len(self.pending)

    def ship(self) -> None:
        with self.lock:
            if self.pending:
                self.shipped.append(self.pending)
            self.pending = []

    def flush(self, timeout: float) -> None:
        self.ship()


def test_a_short_runs_start_ships_with_its_end() -> None:
    """A step ships before it starts runs: a run started in one step is still gathered
    when it ends, so its start and end go out together (and merge, infra/kafka/
    report_batches.py), and its dispatch is committed only after both went out."""
    clock, source, sink = FakeClock(T0), Source(), GatheringSink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=1)
    source.messages = [dispatch(4, T0)]
    worker.step()
    wait_for(lambda: sink.gathered == 2, 5, "the run's start and end gathered")
    assert sink.shipped == [], "its start went out before the run ended"
    assert worker._poll_timeout() <= REPORT_SHIP_WAIT, "gathered reports wait for a step"
    clock.at = T0 + timedelta(seconds=1)
    worker.step()
    assert sink.shipped == [["AttemptStartedReport", "AttemptFinishedReport"]]
    assert source.commits[-1] == {0: 5}


def test_offsets_wait_for_the_reports_of_what_was_started() -> None:
    clock, source, sink = FakeClock(T0), Source(), UnacknowledgedSink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=1)
    source.messages = [dispatch(7, T0)]
    worker.step()
    wait_for(lambda: len(sink.sent) == 2, 5, "start and finish reports")
    clock.at = T0 + timedelta(seconds=1)
    worker.step()
    assert source.commits == [], "committed past a start whose report is not durable"
    sink.acknowledged = True
    clock.at = T0 + timedelta(seconds=2)
    worker.step()
    assert source.commits == [{0: 8}]


def test_a_dispatch_delivered_again_after_it_started_here_is_not_started_again() -> None:
    clock, source, sink = FakeClock(T0), Source(), Sink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=2)
    first = dispatch(3, T0)
    source.messages = [first]
    worker.step()
    wait_for(lambda: len(sink.sent) == 2, 5, "start and finish reports")
    # The group session lapsed and the partition came back from an older committed offset.
    source.messages = [InboundMessage(first.topic, 0, 3, "Dispatch", first.record, b"")]
    clock.at = T0 + timedelta(seconds=1)
    worker.step()
    assert [name for name, _ in sink.sent] == ["AttemptStartedReport", "AttemptFinishedReport"]
    assert source.commits[-1] == {0: 4}, "settled without starting it again"


@dataclass
class FlakySink(ShipCountingSink):
    """Its broker takes nothing until told otherwise; what it could not deliver it keeps."""

    acknowledged: bool = False
    flushes: int = 0

    def flush(self, timeout: float) -> None:
        self.flushes += 1
        if not self.acknowledged:
            raise ReportsNotDelivered("2 report messages unacknowledged")


def test_undelivered_reports_keep_going_out_and_hold_the_commit_until_acknowledged() -> None:
    clock, source, sink = FakeClock(T0), Source(), FlakySink()
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=1)
    source.messages = [dispatch(4, T0)]
    worker.step()
    wait_for(lambda: len(sink.sent) == 2, 5, "start and finish reports")
    for n in range(1, 4):
        clock.at = T0 + timedelta(seconds=n)
        ships = sink.ships
        worker.step()
        assert sink.ships == ships + 1, "the sink is given its chance to send again each time"
    assert sink.flushes >= 3 and source.commits == [], \
        "committed past a start whose report the broker never took"
    sink.acknowledged = True
    clock.at = T0 + timedelta(seconds=5)
    worker.step()
    assert source.commits == [{0: 5}]


def test_a_worker_stopping_with_reports_not_acknowledged_still_closes_its_source() -> None:
    clock, source, sink = FakeClock(T0), Source(), FlakySink()
    closed: list[bool] = []
    source.close = lambda: closed.append(True)  # type: ignore[method-assign]
    worker = WorkerRuntime("w1", source, sink, HandlerRegistry(), clock, slots=1)
    source.messages = [dispatch(0, T0)]
    worker.step()
    worker.stop()
    worker.run_forever()  # does not raise ReportsNotDelivered
    assert closed == [True] and source.commits == []
