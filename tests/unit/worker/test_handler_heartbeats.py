"""A handler's heartbeats (sdk Context.heartbeat, HandlerContext.heartbeat): bounded, sent at
most once a second per attempt with the latest details, and from the first one the
attempt's liveness is the handler's (worker/running_attempts.py)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest

from cronlog.sdk import MAX_DETAILS_BYTES, Context
from cronlog.worker.execution import RunningAttempt
from cronlog.worker.handler_context import HandlerContext
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.running_attempts import HANDLER_BEAT_EVERY, RunningAttempts, heartbeat_pace
from cronlog.worker.runtime import WorkerRuntime
from tests.support.clock import T0, FakeClock
from tests.support.polling import wait_for
from tests.support.worker_transport import Sink, Source, dispatch

INTERVAL = timedelta(seconds=10)


def attempts(clock: FakeClock, sink: Sink) -> RunningAttempts:
    return RunningAttempts("w1", sink, clock, INTERVAL, timedelta(seconds=5), 100)


def running(number: int = 1) -> RunningAttempt:
    context = HandlerContext(run_id=uuid4(), job_id=uuid4(), attempt=number,
                             idempotency_key="k", payload=b"", scheduled_at=T0,
                             timeout_seconds=600)
    return RunningAttempt(str(context.job_id), (str(context.run_id), number), context,
                          T0 + timedelta(minutes=10))


def one_running() -> tuple[FakeClock, Sink, RunningAttempts, RunningAttempt]:
    clock, sink = FakeClock(T0), Sink()
    tracked = attempts(clock, sink)
    attempt = running()
    tracked.begin(attempt)
    return clock, sink, tracked, attempt


def beats(sink: Sink) -> list[dict[str, Any]]:
    return [record for name, record in sink.sent if name == "HeartbeatReport"]


def test_a_tight_loop_of_heartbeats_sends_one_a_second_with_the_latest_details() -> None:
    clock, sink, tracked, attempt = one_running()
    for done in range(1000):
        attempt.context.heartbeat(f"{done}/1000".encode())
    tracked.heartbeat()
    assert [b["details"] for b in beats(sink)] == [b"999/1000"]
    attempt.context.heartbeat(b"a")
    attempt.context.heartbeat(b"b")
    clock.advance(0.5)
    tracked.heartbeat()
    assert len(beats(sink)) == 1, "not again within a second"
    clock.at += HANDLER_BEAT_EVERY
    tracked.heartbeat()
    sent = beats(sink)
    assert [b["details"] for b in sent] == [b"999/1000", b"b"]
    assert sent[1]["run_id"] == attempt.key[0] and sent[1]["attempt"] == 1
    assert sent[1]["at"] == T0, "when the handler gave it"
    clock.at += HANDLER_BEAT_EVERY
    tracked.heartbeat()
    assert len(beats(sink)) == 2, "nothing new, nothing sent"


def test_a_heartbeat_without_details_keeps_the_details_waiting_to_go() -> None:
    clock, sink, tracked, attempt = one_running()
    attempt.context.heartbeat(b"half")
    attempt.context.heartbeat()
    tracked.heartbeat()
    assert [b["details"] for b in beats(sink)] == [b"half"]
    clock.at += HANDLER_BEAT_EVERY
    attempt.context.heartbeat()
    tracked.heartbeat()
    assert [b["details"] for b in beats(sink)] == [b"half", None]


def test_the_workers_own_heartbeats_leave_out_attempts_whose_handler_heartbeats() -> None:
    clock, sink = FakeClock(T0), Sink()
    tracked = attempts(clock, sink)
    quiet, beating = running(), running()
    tracked.begin(quiet)
    tracked.begin(beating)
    beating.context.heartbeat(b"1%")
    tracked.heartbeat()
    clock.at += INTERVAL
    tracked.heartbeat()
    sent = beats(sink)
    assert [(b["run_id"], b["details"]) for b in sent] == [
        (beating.key[0], b"1%"), (quiet.key[0], None)]


def test_a_heartbeat_held_back_goes_when_its_handler_returns_unless_it_was_cancelled() -> None:
    clock, sink = FakeClock(T0), Sink()
    tracked = attempts(clock, sink)
    done, cancelled = running(), running()
    for attempt in (done, cancelled):
        tracked.begin(attempt)
        attempt.context.heartbeat(b"1")
    tracked.heartbeat()
    done.context.heartbeat(b"100%")
    cancelled.context.heartbeat(b"50%")
    tracked.tell_to_stop(cancelled, "cancelled: by a user")
    tracked.handler_returned(done)
    tracked.handler_returned(cancelled)
    assert [b["details"] for b in beats(sink)] == [b"1", b"1", b"100%"]
    done.context.heartbeat(b"after it returned")
    tracked.end(done.key)
    tracked.end(cancelled.key)
    clock.at += INTERVAL
    tracked.heartbeat()
    assert len(beats(sink)) == 3, "an ended attempt's heartbeats go nowhere"


def test_details_are_cut_to_one_kib_and_encoded_like_an_output() -> None:
    clock, sink, tracked, attempt = one_running()
    context = Context("h", attempt.context, T0)
    context.heartbeat("é" * MAX_DETAILS_BYTES)
    tracked.heartbeat()
    (sent,) = beats(sink)
    assert sent["details"] == ("é" * MAX_DETAILS_BYTES).encode()[:MAX_DETAILS_BYTES]
    assert MAX_DETAILS_BYTES == 1024
    clock.at += HANDLER_BEAT_EVERY
    context.heartbeat({"done": 3, "of": 10})
    tracked.heartbeat()
    assert beats(sink)[-1]["details"] == b'{"done":3,"of":10}'
    with pytest.raises(TypeError):
        context.heartbeat(object())


def test_a_heartbeat_before_the_attempt_starts_goes_nowhere() -> None:
    clock, sink = FakeClock(T0), Sink()
    tracked = attempts(clock, sink)
    attempt = running()
    attempt.context.heartbeat(b"early")
    tracked.heartbeat()
    assert beats(sink) == []


def test_a_handlers_last_heartbeat_goes_before_its_outcome() -> None:
    """The owner records the last progress when the outcome arrives: after it, too late."""
    clock, source, sink = FakeClock(T0), Source(), Sink()
    handlers = HandlerRegistry()

    def beating(ctx: HandlerContext) -> bytes:
        for step in range(50):
            ctx.heartbeat(str(step).encode())
        return b"done"
    handlers.register("beating", beating)
    worker = WorkerRuntime("w1", source, sink, handlers, clock, slots=1)
    source.messages = [dispatch(0, T0, handler="beating")]
    worker.step()
    wait_for(lambda: any(n == "AttemptFinishedReport" for n, _ in sink.sent), 5, "finish")
    *earlier, (last_name, last), (finished, _) = sink.sent
    assert (last_name, last["details"], finished) == (
        "HeartbeatReport", b"49", "AttemptFinishedReport")
    # The loop may have sent one of the first steps already (its clock stands still).
    assert len([n for n, _ in earlier if n == "HeartbeatReport"]) <= 1


def test_the_pace_follows_a_short_heartbeat_timeout_within_the_interval() -> None:
    assert heartbeat_pace(INTERVAL, None) == INTERVAL
    assert heartbeat_pace(INTERVAL, timedelta(minutes=1)) == INTERVAL
    assert heartbeat_pace(INTERVAL, timedelta(seconds=6)) == timedelta(seconds=2)
    assert heartbeat_pace(INTERVAL, timedelta(seconds=2)) == HANDLER_BEAT_EVERY, \
        "never more than one a second"


def test_an_attempt_whose_heartbeat_timeout_is_shorter_than_the_interval_beats_in_time() -> None:
    """A job's heartbeat timeout of 3 s under the workers' 10 s interval: its attempt is
    heartbeated every second, the others at the interval, each from its own start."""
    clock, sink = FakeClock(T0), Sink()
    tracked = attempts(clock, sink)
    short, default = running(1), running(2)
    short.heartbeat_timeout = timedelta(seconds=3)
    tracked.begin(short)
    clock.advance(0.5)
    tracked.begin(default)
    seen: list[tuple[float, str]] = []
    for _ in range(24):  # 12 s, a look every half second
        clock.advance(0.5)
        before = len(beats(sink))
        tracked.heartbeat()
        seen += [((clock.at - T0).total_seconds(), b["run_id"]) for b in beats(sink)[before:]]
    assert [at for at, run in seen if run == short.key[0]] == [float(s) for s in range(1, 13)]
    assert [at for at, run in seen if run == default.key[0]] == [10.5]
    tracked.end(short.key)
    clock.advance(1)
    before = len(beats(sink))
    tracked.heartbeat()
    assert len(beats(sink)) == before, "an ended attempt is not heartbeated"


def test_the_worker_reads_the_heartbeat_timeout_from_the_dispatch() -> None:
    """Under the default 10 s interval, a dispatch whose job's heartbeat timeout is 3 s
    has its quiet handler heartbeated within the first second and a half."""
    clock, source, sink = FakeClock(T0), Source(), Sink()
    handlers = HandlerRegistry()
    release = threading.Event()
    handlers.register("quiet", lambda ctx: b"done" if release.wait(10) else b"")
    worker = WorkerRuntime("w1", source, sink, handlers, clock, slots=1)
    message = dispatch(0, T0, handler="quiet", heartbeat_timeout_ms=3000, timeout_ms=60_000)
    source.messages = [message]
    try:
        worker.step()
        clock.advance(1.5)
        worker.step()
        assert [b["run_id"] for b in beats(sink)] == [str(message.record["run_id"])]
    finally:
        release.set()
    wait_for(lambda: any(n == "AttemptFinishedReport" for n, _ in sink.sent), 5, "finish")
