"""Retry, misfire and overlap policies."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from cronlog.domain.bounds import LONGEST_DURATION


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


# The error type of a failure its handler says no retry can mend (cronlog.sdk.NonRetryable).
NON_RETRYABLE = "NonRetryable"
# Error types no retry policy retries: the handler said so, or the worker refused the work
# itself and a retry on a worker of the same configuration would be refused the same way
# (the `command` handler's allow list, docs/handlers.md).
NEVER_RETRIED_ERRORS = frozenset({NON_RETRYABLE, "CommandNotAllowed"})


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
        """The wait before the attempt after `attempt` (1-based); random_unit is in [0, 1).

        Never more than max_backoff nor LONGEST_DURATION, and never raises, whatever the
        coefficient or attempt: a policy stored before today's bounds must not stop a
        partition on its first retry. The cap is decided in logarithms, before the
        coefficient is ever raised to a power that could overflow."""
        ceiling = max(0.0, min(self.max_backoff, LONGEST_DURATION).total_seconds())
        initial = min(max(0.0, self.initial_backoff.total_seconds()), ceiling)
        steps = max(0, attempt - 1)
        base = initial
        # NaN fails every comparison, so a NaN coefficient stays at the initial backoff.
        if initial > 0.0 and steps and self.coefficient > 1.0:
            if steps * math.log(self.coefficient) >= math.log(ceiling / initial):
                base = ceiling
            else:
                base = initial * self.coefficient ** steps
        jitter = self.jitter if 0.0 <= self.jitter <= 1.0 else 1.0
        unit = random_unit if 0.0 <= random_unit < 1.0 else 0.0
        jittered = base * (1.0 - jitter) + base * jitter * unit
        return timedelta(seconds=min(jittered, ceiling))

    def retries(self, attempt: int, error_type: str | None) -> bool:
        if error_type is not None and (error_type in self.non_retryable_errors
                                       or error_type in NEVER_RETRIED_ERRORS):
            return False
        return attempt < self.max_attempts
