"""What follows an attempt that failed, was lost or timed out: the next attempt per the
job's retry policy (dispatched now, or waiting when due past what the owner dispatches
yet), or the end of the run (dead-lettered) with its reason."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cronlog.domain.policies import RetryPolicy
from cronlog.domain.run_states import WORKER_CLOCK_LEAD


@dataclass(frozen=True)
class Retry:
    attempt: int
    not_before: datetime
    # Due after what the owner dispatches now: recorded as waiting, dispatched later.
    waiting: bool


@dataclass(frozen=True)
class DeadLetter:
    reason: str


def retry_counted_from(finished_at: datetime, at: datetime) -> datetime:
    """A failed attempt's retry waits from the worker's end, but a worker's clock may not
    push it further than WORKER_CLOCK_LEAD past the owner's (`at`)."""
    return min(max(finished_at, at), at + WORKER_CLOCK_LEAD)


def after_attempt(policy: RetryPolicy, attempt: int, error: str, error_type: str,
                  ended_at: datetime, random_unit: float,
                  dispatch_until: datetime | None, base: int = 0) -> Retry | DeadLetter:
    """Retries per policy — dispatched now when due within `dispatch_until` (None: at
    once, whenever due), else waiting — or dead-letters the run. `attempt` counts from the
    run's last re-drive, whose attempts follow attempt `base` (domain/run_redrive.py)."""
    if policy.retries(attempt, error_type):
        not_before = ended_at + policy.backoff(attempt, random_unit)
        return Retry(base + attempt + 1, not_before,
                     waiting=dispatch_until is not None and not_before > dispatch_until)
    since = f" since the re-drive after attempt {base}" if base else ""
    reason = (f"attempt {attempt} of {policy.max_attempts}{since} failed: {error}"
              if attempt >= policy.max_attempts else f"not retryable: {error}")
    return DeadLetter(reason[:2000])
