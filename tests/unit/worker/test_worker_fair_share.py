"""The worker's loop with its slot share (worker/slot_share.py): a tenant's backlog of long
runs takes at most its share while another tenant's dispatch is held, a tenant alone takes
every slot, and dispatch offsets are committed only past what was started or dropped even
when a later dispatch starts before an earlier one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from cronlog.ports import InboundMessage
from cronlog.worker.handler_context import HandlerContext
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.runtime import WorkerRuntime
from tests.support.clock import FakeClock
from tests.support.polling import after_each, wait_for
from tests.support.worker_transport import T0, Sink, Source, dispatch


class Release:
    """Lets blocked handlers return: one at a time, or all."""

    def __init__(self) -> None:
        self._permits = threading.Semaphore(0)

    def one(self) -> None:
        self._permits.release()

    def all(self) -> None:
        self._permits.release(1000)

    def wait(self) -> None:
        self._permits.acquire(timeout=30)


@pytest.fixture
def release() -> Iterator[Release]:
    gate = Release()
    yield gate
    gate.all()


def worker_with(release: Release, slots: int = 4,
                **options: object) -> tuple[WorkerRuntime, FakeClock, Source, Sink]:
    clock, source, sink = FakeClock(T0), Source(), Sink()
    handlers = HandlerRegistry()

    def block(ctx: HandlerContext) -> bytes:
        release.wait()
        return b""

    handlers.register("block", block)
    worker = WorkerRuntime("w1", source, sink, handlers, clock, slots=slots,
                           **options)  # type: ignore[arg-type]
    return worker, clock, source, sink


def of(tenant: str, offset: int, not_before: datetime, handler: str = "block",
       partition: int = 0) -> InboundMessage:
    message = dispatch(offset, not_before, handler)
    record = {**message.record, "tenant": tenant}
    return InboundMessage(message.topic, partition, offset, message.name, record, b"")


def started(sink: Sink) -> list[int]:
    return [int(r["attempt"]) for n, r in sink.sent if n == "AttemptStartedReport"]


def started_offsets(sink: Sink, messages: list[InboundMessage]) -> list[int]:
    by_run = {m.record["run_id"]: m.offset for m in messages}
    return [by_run[r["run_id"]] for n, r in sink.sent if n == "AttemptStartedReport"]


def test_a_backlog_of_long_runs_takes_its_share_and_the_canary_starts_on_time(
        release: Release) -> None:
    worker, clock, source, sink = worker_with(release)
    hog = [of("hog", n, T0) for n in range(6)]
    canary = of("canary", 6, T0 + timedelta(seconds=1), handler="echo")
    source.messages = [*hog, canary]
    worker.step()
    assert started_offsets(sink, [*hog, canary]) == [0, 1], \
        "the hog holds half the slots while the canary's dispatch is held"
    assert worker.occupancy().busy_by_tenant == {"hog": 2}
    clock.at = T0 + timedelta(seconds=1)
    worker.step()
    assert started_offsets(sink, [*hog, canary]) == [0, 1, 6], "the canary at its time"
    wait_for(lambda: any(n == "AttemptFinishedReport" for n, _ in sink.sent), 5,
             "the canary finished")
    # Started out of arrival order: the commit stays at the lowest dispatch not started.
    clock.at = T0 + timedelta(seconds=3)
    worker.step()
    assert source.commits[-1] == {0: 2}
    assert worker.occupancy().held == 4


def test_a_tenant_alone_takes_every_slot_and_shares_once_another_arrives(
        release: Release) -> None:
    worker, clock, source, sink = worker_with(release, slots=4)
    hog = [of("hog", n, T0) for n in range(6)]
    other = of("other", 6, T0, handler="echo")
    source.messages = list(hog)
    worker.step()
    assert started_offsets(sink, hog) == [0, 1, 2, 3], "alone: every slot"
    source.messages = [other]
    clock.at = T0 + timedelta(milliseconds=10)
    worker.step()
    assert len(started(sink)) == 4, "no slot free: nothing is taken back from a handler"
    release.one()
    wait_for(after_each(worker.step, lambda: len(started(sink)) == 5), 5, "a slot freed")
    assert started_offsets(sink, [*hog, other])[4] == 6, "it went to the other tenant"
    release.one()
    clock.at = T0 + timedelta(milliseconds=20)
    wait_for(after_each(worker.step, lambda: worker.occupancy().busy_by_tenant == {"hog": 2}), 5,
             "one of the hog's handlers returned")
    worker.step()
    assert len(started(sink)) == 5, \
        "the hog holds 2 of 4, its half, while the other tenant (it ran lately) is present"
    release.one()
    wait_for(after_each(worker.step, lambda: len(started(sink)) == 6), 5, "below its cap again")


def test_the_share_setting_reaches_the_loop(release: Release) -> None:
    worker, _, source, sink = worker_with(release, slots=4, tenant_share=1.0)
    source.messages = [*(of("hog", n, T0) for n in range(6)),
                       of("canary", 6, T0 + timedelta(seconds=1), handler="echo")]
    worker.step()
    assert len(started(sink)) == 4, "a share of 1: no cap"
    assert worker.occupancy().tenant_share == 1.0


def test_held_back_dispatches_can_be_cancelled_or_revoked_and_are_settled_or_forgotten(
        release: Release) -> None:
    worker, clock, source, sink = worker_with(release, slots=2)
    hog = [of("hog", n, T0) for n in range(3)]
    moved = of("hog", 0, T0, partition=1)
    canary = of("canary", 3, T0 + timedelta(seconds=30), handler="echo")
    source.messages = [*hog, moved, canary]
    worker.step()
    assert len(started(sink)) == 1 and worker.occupancy().held == 4
    cancel = InboundMessage("dispatch.q", 0, 4, "CancelAttempt", {
        "run_id": hog[2].record["run_id"], "attempt": 1, "reason": "paused"}, b"")
    source.messages = [cancel]
    worker.step()
    assert worker.occupancy().held == 3
    source.revoke([1])
    assert worker.occupancy().held == 2
    clock.at = T0 + timedelta(seconds=1)
    worker.step()
    assert source.commits == [{0: 1, 1: 0}], "offset 1 waits for its start"
    release.all()
    wait_for(after_each(worker.step, lambda: len(started(sink)) == 2), 5, "the hog's next run")
    clock.at = T0 + timedelta(seconds=2)
    worker.step()
    assert source.commits[-1] == {0: 3}, "past the started one and the cancelled one"


def test_a_run_held_back_by_its_share_starts_as_soon_as_one_of_its_tenant_s_handlers_ends(
        release: Release, monkeypatch: pytest.MonkeyPatch) -> None:
    # A long slot wait makes the point without timing: the step waits for the handler
    # finishing, rather than leaving the held-back run to a later pass of the loop (which
    # capped a capped tenant's burst at its share of slots per SLOT_WAIT: 640 runs/s).
    worker, _clock, source, sink = worker_with(release)
    hog = [of("hog", n, T0) for n in range(4)]
    later = of("other", 4, T0 + timedelta(seconds=30), handler="echo")
    source.messages = [*hog, later]
    # Nothing of the hog's ends during this pass, which gives up after the slot wait.
    monkeypatch.setattr("cronlog.worker.runtime.SLOT_WAIT", 0.05)
    worker.step()
    assert started(sink) == [1, 1], "the hog holds its share, two of four slots"
    monkeypatch.setattr("cronlog.worker.runtime.SLOT_WAIT", 10.0)
    step = threading.Thread(target=worker.step)
    step.start()
    release.one()
    step.join(timeout=20)
    assert not step.is_alive()
    assert len(started(sink)) == 3, "started within the same pass of the loop"
