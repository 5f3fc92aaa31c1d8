"""WorkerAnnouncer: a worker process tells the fleet it is there, at its start, every
ANNOUNCE_EVERY after, and withdraws at a clean stop (docs/workers.md)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.fleet.live_workers import ANNOUNCE_EVERY
from cronlog.ports import Clock

log = logging.getLogger(__name__)


class Announcements(Protocol):
    """Where announcements go (infra/kafka/worker_announcements.py)."""

    def announce(self, announcement: WorkerAnnouncement) -> None: ...

    def withdraw(self, worker_id: str) -> None: ...


class WorkerAnnouncer:
    def __init__(self, describe: Callable[[datetime], WorkerAnnouncement], out: Announcements,
                 clock: Clock, every: timedelta = ANNOUNCE_EVERY) -> None:
        """describe: the worker as it is at that instant (slots in use change)."""
        self._describe = describe
        self._out = out
        self._clock = clock
        self._every = every

    def announce(self) -> str:
        """One announcement; returns the worker's id. A failure is logged, not raised: an
        unannounced worker still runs its attempts, and the next period tries again."""
        announcement = self._describe(self._clock.now())
        try:
            self._out.announce(announcement)
        except Exception:
            log.warning("announcing worker %s failed; trying again in %s",
                        announcement.worker_id, self._every, exc_info=True)
        return announcement.worker_id

    def run(self, stop: threading.Event) -> None:
        """Until stop is set: at once, then every period; then the withdrawal, so that the
        stopped worker leaves the list at once instead of after the live window."""
        worker_id = self.announce()
        while not stop.wait(self._every.total_seconds()):
            worker_id = self.announce()
        try:
            self._out.withdraw(worker_id)
        except Exception:
            log.warning("withdrawing worker %s failed; it leaves the list when its last "
                        "announcement expires", worker_id, exc_info=True)
