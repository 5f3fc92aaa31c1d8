"""The worker's announcing loop: at once, every period, a withdrawal at a clean stop, and a
failing topic never stops the worker."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.fleet.announcer import WorkerAnnouncer
from tests.support.clock import FakeClock
from tests.support.polling import wait_for


class Recorded:
    def __init__(self, failing: bool = False) -> None:
        self.said: list[tuple[str, str]] = []
        self.failing = failing

    def announce(self, announcement: WorkerAnnouncement) -> None:
        if self.failing:
            raise OSError("broker away")
        self.said.append(("announce", announcement.worker_id))

    def withdraw(self, worker_id: str) -> None:
        if self.failing:
            raise OSError("broker away")
        self.said.append(("withdraw", worker_id))


def describe(at: datetime) -> WorkerAnnouncement:
    return WorkerAnnouncement("w-1", "host", ("default",), ("echo",), 4, 1, "1.0", at)


def test_announces_at_start_and_every_period_then_withdraws_at_stop() -> None:
    out = Recorded()
    announcer = WorkerAnnouncer(describe, out, FakeClock(), every=timedelta(milliseconds=20))
    stop = threading.Event()
    thread = threading.Thread(target=announcer.run, args=(stop,))
    thread.start()
    wait_for(lambda: len(out.said) >= 3, 5, "three announcements", interval=0.01)
    stop.set()
    thread.join(timeout=5)
    assert out.said[0] == ("announce", "w-1")
    assert out.said[-1] == ("withdraw", "w-1")
    assert set(out.said[:-1]) == {("announce", "w-1")}


def test_a_failing_topic_is_logged_and_the_loop_goes_on() -> None:
    announcer = WorkerAnnouncer(describe, Recorded(failing=True), FakeClock(),
                                every=timedelta(milliseconds=1))
    stop = threading.Event()
    stop.set()
    announcer.run(stop)  # raises nothing
    assert announcer.announce() == "w-1"
