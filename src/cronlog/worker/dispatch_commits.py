"""The worker's dispatch offsets: which it may commit (worker/offsets.py), and committing
them at most every commit interval, only once the reports that settle them are durable."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import datetime, timedelta

from cronlog.worker.offsets import OffsetTracker
from cronlog.worker.ports import DispatchSource, ReportSink, ReportsNotDelivered

# The worker's log lines keep one logger name, whichever part of it writes them.
log = logging.getLogger("cronlog.worker.runtime")

# The loop's commits wait this long for their reports' acknowledgements, then leave the
# offsets where they are for the next round: with a partition leader's broker dead, the acks
# wait for the new leader (seconds), and a loop waiting 10 s for them started nothing due
# meanwhile (chaos cluster-failover). Stopping still waits up to 10 s.
COMMIT_FLUSH_WAIT = 1.0


class DispatchCommits:
    def __init__(self, source: DispatchSource, reports: ReportSink,
                 commit_interval: timedelta) -> None:
        """commit_interval: committing flushes the reports first and waits for the broker:
        at most this often. A worker that dies redelivers what it started since (at least
        once, same keys)."""
        self._source = source
        self._reports = reports
        self._commit_interval = commit_interval
        self._offsets = OffsetTracker()
        self._lock = threading.Lock()
        self._committed: dict[int, int] = {}
        self._last_commit: datetime | None = None

    def received(self, partition: int, offset: int) -> None:
        with self._lock:
            self._offsets.received(partition, offset)

    def settled(self, partition: int, offset: int) -> None:
        """Started or dropped: committable past it."""
        with self._lock:
            self._offsets.settled(partition, offset)

    def forget(self, partitions: Iterable[int]) -> None:
        """Revoked partitions: their offsets are their next worker's."""
        with self._lock:
            for partition in partitions:
                self._offsets.forget(partition)
                self._committed.pop(partition, None)

    def commit(self, now: datetime, force: bool = False) -> None:
        if (not force and self._last_commit is not None
                and now - self._last_commit < self._commit_interval):
            return
        self._last_commit = now
        with self._lock:
            offsets = self._offsets.committable()
        changed = {p: o for p, o in offsets.items() if self._committed.get(p) != o}
        if changed:
            # Reports must be durable before the dispatch they settle is committed.
            try:
                self._reports.flush(10 if force else COMMIT_FLUSH_WAIT)
            except ReportsNotDelivered as exc:
                # Not yet: the offsets stay where they are and the next cycle tries again.
                # The sink keeps the reports it could not deliver and sends them again.
                log.warning("dispatch offsets not committed, reports not acknowledged: %s",
                            exc)
                return
            self._source.commit(changed)
            self._committed.update(changed)
