from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

from cronlog.worker.start_lateness import StartLateness

T0 = datetime(2026, 12, 3, 17, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def test_late_starts_are_told_apart_by_when_their_dispatch_arrived() -> None:
    lateness = StartLateness(interval=timedelta(seconds=10))
    assert lateness.report(T0) is None  # the interval starts
    lateness.started(T0, T0 - 2000 * MS, T0 + 20 * MS)     # on time
    lateness.started(T0, T0 - 2000 * MS, T0 + 900 * MS)    # waited at the worker
    lateness.started(T0, T0 + 700 * MS, T0 + 800 * MS)     # arrived late
    lateness.phase_took("commit", time.monotonic() - 0.3)
    assert lateness.report(T0 + 9 * 1000 * MS) is None, "the interval is not over"
    line = lateness.report(T0 + 10 * 1000 * MS)
    assert line is not None
    assert line.startswith("2 of 3 starts in the last 10 s more than 500 ms late: 1 reached "
                           "this worker after their due time, 1 waited here")
    commit_ms = re.search(r"commit (\d+) ms", line)
    assert commit_ms is not None and int(commit_ms.group(1)) >= 300, line
    # Counts start over; an interval without late starts says nothing.
    lateness.started(T0, T0 - 2000 * MS, T0 + 20 * MS)
    assert lateness.report(T0 + 20 * 1000 * MS) is None
