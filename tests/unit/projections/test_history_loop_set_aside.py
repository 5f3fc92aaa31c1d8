"""The history projector sets aside an event it cannot write; the rest of history flows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cronlog.ports import UNREADABLE, InboundMessage, LogUnavailable, StoreUnreachable
from cronlog.projections.history_loop import ATTEMPTS_BEFORE_BLAME, HistoryProjectorLoop
from tests.support.clock import FakeClock
from tests.support.history_loop import AT, Feed, Projector, Rejected, event


def loop(feed: Feed, projector: Projector, rejected: Rejected) -> HistoryProjectorLoop:
    return HistoryProjectorLoop(feed, projector, FakeClock(AT), rejected, retry_delay=0.0)


def test_one_event_that_cannot_be_written_is_set_aside_and_the_others_are_stored() -> None:
    batch = [event(n, poison=(n == 5)) for n in range(12)]
    feed, projector, rejected = Feed([batch]), Projector(), Rejected()
    assert loop(feed, projector, rejected).step() == 12
    assert sorted(projector.stored) == [n for n in range(12) if n != 5]
    assert [(o, "OverflowError" in e) for o, e in rejected.offsets()] == [(5, True)]
    assert len(feed.committed) == 12


def test_an_unreadable_event_is_set_aside_without_being_applied() -> None:
    unreadable = InboundMessage("run-events", 0, 3, UNREADABLE, {"error": "no marker"}, b"x")
    feed, projector, rejected = Feed([[event(1), unreadable, event(4)]]), Projector(), Rejected()
    loop(feed, projector, rejected).step()
    assert sorted(projector.stored) == [1, 4] and rejected.offsets() == [(3, "no marker")]


def test_while_the_store_is_away_nothing_is_set_aside() -> None:
    feed, projector = Feed([[event(1), event(2)]]), Projector(down=5)
    rejected = Rejected(up=False)
    loop(feed, projector, rejected).step()
    assert projector.stored == [1, 2] and rejected.offsets() == []
    assert projector.calls == 6


def test_writes_the_store_did_not_answer_are_never_blamed_on_the_batch() -> None:
    """A restart: the ping already reaches the new server while writes still go to the old
    connection's corpse. Errors the server answered with count; these do not."""
    feed = Feed([[event(1), event(2)]])
    projector = Projector(down=ATTEMPTS_BEFORE_BLAME + 2, away=StoreUnreachable)
    rejected = Rejected(up=True)
    loop(feed, projector, rejected).step()
    assert projector.stored == [1, 2] and rejected.offsets() == []


def test_errors_the_store_answered_with_are_blamed_after_a_few_tries() -> None:
    feed = Feed([[event(1)]])
    projector = Projector(down=ATTEMPTS_BEFORE_BLAME + 2)
    rejected = Rejected(up=True)
    loop(feed, projector, rejected).step()
    assert projector.stored == [] and [o for o, _ in rejected.offsets()] == [1]


@dataclass
class AwayFeed(Feed):
    """A feed whose log cannot take offsets for the first `away` commits."""

    away: int = 1
    refused: int = 0

    def commit(self, applied: Sequence[InboundMessage]) -> None:
        if self.refused < self.away:
            self.refused += 1
            raise LogUnavailable("Commit failed: Local: Waiting for coordinator")
        super().commit(applied)


def test_offsets_the_log_cannot_take_go_with_the_next_batch() -> None:
    """Kafka away at the commit: the projector goes on (it exited, and stayed down), and the
    next batch's commit carries the offsets past both."""
    feed = AwayFeed([[event(1), event(2)], [event(3)]])
    projector = Projector()
    projection = loop(feed, projector, Rejected())
    assert projection.step() == 2
    assert feed.committed == [] and feed.refused == 1
    assert projection.step() == 1
    assert projector.stored == [1, 2, 3]
    assert [m.offset for m in feed.committed] == [3]
