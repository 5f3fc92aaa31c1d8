"""LiveWorkers: the api's record of the workers that announced themselves, bounded in
size, with the ones not heard from lately left out (docs/workers.md)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime, timedelta

from cronlog.fleet.announcement import WorkerAnnouncement, bounded

# How often a worker announces itself, and after how many missed announcements it no
# longer counts as live: one lost or late announcement is no absence.
ANNOUNCE_EVERY = timedelta(seconds=10)
LIVE_PERIODS = 3
# The most workers an api keeps. A deployment runs hundreds at most; a flood of made-up
# ids (anyone who can write to the topic) evicts the longest-silent entries instead of
# growing the api's memory (invariant 12). Each entry is bounded (announcement.py), a few
# tens of KiB at most.
MAX_WORKERS = 2_000


class LiveWorkers:
    """Thread-safe: a reader thread records, RPC threads ask. Every method costs at most
    one pass over the at most MAX_WORKERS entries."""

    def __init__(self, *, live_for: timedelta = ANNOUNCE_EVERY * LIVE_PERIODS,
                 most: int = MAX_WORKERS) -> None:
        self._live_for = live_for
        self._most = most
        self._seen: dict[str, WorkerAnnouncement] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def record(self, announcement: WorkerAnnouncement, now: datetime) -> None:
        """Keeps the newest announcement of each worker; when full, makes room by dropping
        the expired entries, then the longest silent one (unless this one is older still)."""
        announcement = bounded(announcement)
        with self._lock:
            held = self._seen.get(announcement.worker_id)
            if held is not None:
                if announcement.at >= held.at:
                    self._seen[announcement.worker_id] = announcement
                return
            if len(self._seen) >= self._most:
                self._drop_expired(now)
            if len(self._seen) >= self._most:
                oldest = min(self._seen.values(), key=lambda a: a.at)
                if oldest.at > announcement.at:
                    return
                del self._seen[oldest.worker_id]
            self._seen[announcement.worker_id] = announcement

    def withdraw(self, worker_id: str) -> None:
        """A worker that stopped cleanly (its tombstone)."""
        with self._lock:
            self._seen.pop(worker_id, None)

    def live(self, now: datetime) -> list[WorkerAnnouncement]:
        """The workers heard from within the live window, by id; forgets the others."""
        with self._lock:
            self._drop_expired(now)
            return sorted(self._seen.values(), key=lambda a: a.worker_id)

    def _drop_expired(self, now: datetime) -> None:
        expired = [w for w, a in self._seen.items() if now - a.at > self._live_for]
        for worker_id in expired:
            del self._seen[worker_id]


def absent_handler_warning(workers: Iterable[WorkerAnnouncement], queue: str,
                           handler: str) -> str | None:
    """The warning a created or updated job gets when no live worker of its queue offers
    its handler: its runs would wait, then be lost at their start timeout."""
    serving = [a for a in workers if queue in a.queues]
    if any(handler in a.handlers for a in serving):
        return None
    if not serving:
        return (f"no live worker serves queue {queue!r}: runs wait until one does (and are "
                "lost, then retried, at their start timeout)")
    return (f"no live worker of queue {queue!r} offers handler {handler!r}: runs wait until "
            "one does (and are lost, then retried, at their start timeout)")
