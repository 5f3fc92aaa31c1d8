"""What the history loop tells its HistoryMetrics port: events applied by name, the newest
applied event's time, the batch it holds, and events set aside by a bounded reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cronlog.ports import UNREADABLE, InboundMessage
from cronlog.projections.history import MissingRun
from cronlog.projections.history_loop import HistoryProjectorLoop
from tests.support.clock import FakeClock
from tests.support.history_loop import AT, Feed, Projector, Rejected, event


@dataclass
class Told:
    received: list[tuple[int, datetime | None]] = field(default_factory=list)
    applied: dict[str, int] = field(default_factory=dict)
    newest: list[datetime | None] = field(default_factory=list)
    aside: list[str] = field(default_factory=list)

    def batch_received(self, events: int, oldest: datetime | None) -> None:
        self.received.append((events, oldest))

    def events_applied(self, kinds: Mapping[str, int], newest: datetime | None) -> None:
        for kind, count in kinds.items():
            self.applied[kind] = self.applied.get(kind, 0) + count
        self.newest.append(newest)

    def event_set_aside(self, reason: str) -> None:
        self.aside.append(reason)


def at(n: int, name: str = "RunScheduled") -> InboundMessage:
    return InboundMessage("run-events", 0, n, name, {"n": n, "at": AT + timedelta(seconds=n)},
                          b"raw")


def run(batches: list[list[InboundMessage]], projector: Projector | None = None) -> Told:
    told = Told()
    loop = HistoryProjectorLoop(Feed(batches), projector or Projector(), FakeClock(AT), Rejected(),
                                retry_delay=0.0, metrics=told)
    for _ in range(len(batches) + 1):
        loop.step()
    return told


def test_applied_events_are_counted_by_name_with_the_newest_time() -> None:
    told = run([[at(1), at(3, "RunStarted"), at(2)]])
    assert told.applied == {"RunScheduled": 2, "RunStarted": 1}
    assert told.newest == [AT + timedelta(seconds=3)]
    # The batch was held from its oldest event; the next poll found nothing waiting.
    assert told.received == [(3, AT + timedelta(seconds=1)), (0, None)]


def test_set_aside_events_are_counted_by_reason_not_as_applied() -> None:
    unreadable = InboundMessage("run-events", 0, 7, UNREADABLE, {"error": "no marker"}, b"x")
    told = run([[event(1), event(5, poison=True), unreadable, event(8)]])
    assert told.applied == {"RunScheduled": 2}
    # OverflowError is none of the projection's own refusals.
    assert sorted(told.aside) == ["refused", "unreadable"]


@dataclass
class RefusesRun(Projector):
    def apply_batch(self, events: object) -> None:
        raise MissingRun("RunStarted without its RunScheduled")


def test_the_projections_own_refusals_are_named() -> None:
    assert run([[at(1)]], RefusesRun()).aside == ["missing_run"]
