"""Retry, misfire and overlap policies."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum


class MisfirePolicy(StrEnum):
    """What to do with fire times that passed while the job could not fire (downtime, pause).

    RUN_LATEST is the default: one catch-up run for the latest missed fire time; the others
    are recorded as missed runs, never dropped.
    """

    RUN_ALL = "run_all"
    RUN_LATEST = "run_latest"
    SKIP = "skip"


class OverlapPolicy(StrEnum):
    """What to do when a fire time comes while an earlier run of the job is still going."""

    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    CANCEL_OTHER = "cancel_other"


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    initial_backoff: timedelta = timedelta(seconds=1)
    max_backoff: timedelta = timedelta(minutes=5)
    coefficient: float = 2.0
    # Fraction of the backoff that is randomised: 1.0 is "full jitter", 0.0 none.
    jitter: float = 1.0
    non_retryable_errors: tuple[str, ...] = ()

    def backoff(self, attempt: int, random_unit: float) -> timedelta:
        """The wait before the attempt after `attempt` (1-based); random_unit is in [0, 1)."""
        base = self.initial_backoff.total_seconds() * self.coefficient ** max(0, attempt - 1)
        capped = min(base, self.max_backoff.total_seconds())
        jittered = capped * (1.0 - self.jitter) + capped * self.jitter * random_unit
        return timedelta(seconds=jittered)

    def retries(self, attempt: int, error_type: str | None) -> bool:
        if error_type is not None and error_type in self.non_retryable_errors:
            return False
        return attempt < self.max_attempts
