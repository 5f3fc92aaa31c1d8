"""The api's record of live workers: expiry, tombstones, and bounds a flood of made-up
announcements cannot grow past (invariant 12)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from cronlog.fleet.announcement import MAX_HANDLERS, MAX_ID_CHARS, WorkerAnnouncement, bounded
from cronlog.fleet.live_workers import LiveWorkers, absent_handler_warning
from tests.support.clock import T0

SECOND = timedelta(seconds=1)


def worker(worker_id: str = "w-1", at_seconds: float = 0, queues: tuple[str, ...] = ("default",),
           handlers: tuple[str, ...] = ("echo",)) -> WorkerAnnouncement:
    return WorkerAnnouncement(worker_id=worker_id, host="host-1", queues=queues,
                              handlers=handlers, slots=16, slots_in_use=2, version="1.0",
                              at=T0 + at_seconds * SECOND)


def test_a_worker_is_live_until_its_announcements_stop_for_the_live_window() -> None:
    workers = LiveWorkers(live_for=30 * SECOND)
    workers.record(worker(), T0)
    assert [a.worker_id for a in workers.live(T0 + 30 * SECOND)] == ["w-1"]
    assert workers.live(T0 + 31 * SECOND) == []
    # Forgotten, not merely hidden: its memory is given back.
    assert len(workers) == 0


def test_a_newer_announcement_replaces_the_older_and_an_older_one_is_ignored() -> None:
    workers = LiveWorkers(live_for=30 * SECOND)
    workers.record(worker(at_seconds=10, handlers=("echo", "backup")), T0)
    workers.record(worker(at_seconds=5), T0)
    [seen] = workers.live(T0 + 10 * SECOND)
    assert seen.handlers == ("backup", "echo") and seen.at == T0 + 10 * SECOND


def test_a_tombstone_removes_the_worker_at_once() -> None:
    workers = LiveWorkers()
    workers.record(worker("w-1"), T0)
    workers.record(worker("w-2"), T0)
    workers.withdraw("w-1")
    workers.withdraw("never-seen")
    assert [a.worker_id for a in workers.live(T0)] == ["w-2"]


def test_a_flood_of_made_up_workers_stays_within_the_bound_and_evicts_the_longest_silent() -> None:
    workers = LiveWorkers(live_for=30 * SECOND, most=3)
    workers.record(worker("real", at_seconds=0), T0)
    for n in range(100):
        workers.record(worker(f"fake-{n}", at_seconds=1 + n / 100), T0 + SECOND)
        assert len(workers) <= 3
    assert "real" not in {a.worker_id for a in workers.live(T0 + 2 * SECOND)}
    # The real worker's next announcement is newer than the flood's oldest: it is back.
    workers.record(worker("real", at_seconds=10), T0 + 10 * SECOND)
    assert "real" in {a.worker_id for a in workers.live(T0 + 10 * SECOND)}
    assert len(workers) == 3


def test_when_full_expired_entries_make_room_before_any_live_one() -> None:
    workers = LiveWorkers(live_for=30 * SECOND, most=2)
    workers.record(worker("old", at_seconds=0), T0)
    workers.record(worker("live", at_seconds=40), T0 + 40 * SECOND)
    workers.record(worker("new", at_seconds=41), T0 + 41 * SECOND)
    assert [a.worker_id for a in workers.live(T0 + 41 * SECOND)] == ["live", "new"]


def test_an_announcement_older_than_every_entry_of_a_full_record_is_not_kept() -> None:
    workers = LiveWorkers(live_for=30 * SECOND, most=1)
    workers.record(worker("a", at_seconds=10), T0 + 10 * SECOND)
    workers.record(worker("b", at_seconds=5), T0 + 10 * SECOND)
    assert [a.worker_id for a in workers.live(T0 + 10 * SECOND)] == ["a"]


def test_each_announcement_is_bounded_in_size() -> None:
    huge = replace(worker(), worker_id="w" * 10_000, handlers=tuple(f"h{n}" for n in range(5000)),
                   slots=-3, slots_in_use=99)
    workers = LiveWorkers()
    workers.record(huge, T0)
    [seen] = workers.live(T0)
    assert len(seen.worker_id) == MAX_ID_CHARS
    assert len(seen.handlers) == MAX_HANDLERS
    assert (seen.slots, seen.slots_in_use) == (0, 0)
    assert bounded(seen) == seen


def test_the_warning_names_an_absent_queue_or_an_absent_handler_and_none_when_offered() -> None:
    live = [worker(queues=("default",), handlers=("echo",))]
    assert absent_handler_warning(live, "default", "echo") is None
    handler = absent_handler_warning(live, "default", "backup")
    assert handler is not None and "'backup'" in handler and "'default'" in handler
    queue = absent_handler_warning(live, "reports", "echo")
    assert queue is not None and "no live worker serves queue 'reports'" in queue
