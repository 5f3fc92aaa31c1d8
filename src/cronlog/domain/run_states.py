"""The states a run and its attempts pass through, and the small rules the Run aggregate
applies to them (where a spread job's run falls, what kind of error a worker reported)."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

SCHEDULED = "scheduled"
RUNNING = "running"
SUCCEEDED = "succeeded"
# Out of retries: failed for good, and on the dead-letter topic.
DEAD_LETTERED = "dead_lettered"
MISSED = "missed"
# Recorded, not run, because an earlier run of the job was still going (overlap policy).
SKIPPED = "skipped"
CANCELLED = "cancelled"

ATTEMPT_NONE = "none"
# Due later than the workers hold dispatches (a retry's backoff, a job's spread): the owner
# dispatches it when its time comes within the lookahead, so a worker never holds a dispatch
# for long and a worker crash re-runs only what it started in the last lookahead.
WAITING = "waiting"
DISPATCHED = "dispatched"
ATTEMPT_RUNNING = "running"
ATTEMPT_SUCCEEDED = "succeeded"
ATTEMPT_FAILED = "failed"
ATTEMPT_LOST = "lost"
ATTEMPT_TIMED_OUT = "timed_out"
ATTEMPT_CANCELLED = "cancelled"
TERMINAL_RUN = frozenset({SUCCEEDED, DEAD_LETTERED, MISSED, SKIPPED, CANCELLED})
WORKER_CLOCK_LEAD = timedelta(hours=1)


def spread_offset(job_id: UUID, spread: timedelta) -> timedelta:
    """A job's fixed place within its spread window: the same for every run of the job."""
    window_ms = int(spread.total_seconds() * 1000)
    return timedelta(milliseconds=job_id.int % window_ms) if window_ms > 0 else timedelta(0)


def error_type_of(error: str) -> str:
    """Workers report errors as 'Type: message'."""
    head, sep, _ = error.partition(":")
    return head.strip() if sep else error.strip()
