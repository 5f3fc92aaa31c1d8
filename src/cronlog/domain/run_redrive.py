"""A run's dead letter (RunFailed: its last attempt failed and the policy retries no more)
and its re-drive (issue 37, docs/lifecycle.md "Re-driving a dead letter"): a new series of
attempts under the run's own id, so its idempotency key stays what handlers saw.

The attempts go on from the run's numbering (the first re-driven attempt after attempt 3
is attempt 4), and the job's retry policy counts them afresh: `attempt_base` is the last
attempt before the re-drive, and the policy sees attempt - attempt_base. RunRedriven
names the request and who asked, for the audit.

A base class of the Run aggregate, like AttemptProgress, so that RunRedriven stays the
Run's event, as RunFailed is.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from eventsourcing.domain import event

from cronlog.domain.attempt_progress import AttemptProgress
from cronlog.domain.errors import DomainError
from cronlog.domain.run_states import DEAD_LETTERED, SCHEDULED

MAX_REQUESTED_BY = 200


class RunNotDeadLettered(DomainError):
    """Only a dead-lettered run can be re-driven: any other has attempts to come, or
    ended in a way a new attempt would not change."""


class RunRedrive(AttemptProgress):
    if TYPE_CHECKING:  # the Run's, declared there (an annotation here would be an event field)
        job_id: UUID
        status: str
        attempt: int
        attempt_base: int

        def _dispatched(self, job_id: UUID, attempt: int, not_before: datetime,
                        timeout_ms: int, timestamp: datetime) -> None: ...

    def redrive(self, request_id: str, requested_by: str, timeout: timedelta,
                at: datetime) -> None:
        """Dispatches the dead-lettered run's next attempt now, its retry policy counted
        from it. Raises RunNotDeadLettered for a run in any other status."""
        if self.status != DEAD_LETTERED:
            raise RunNotDeadLettered(f"run {self.id} is {self.status}, not dead-lettered: "
                                     "only a dead letter can be re-driven")
        self._redriven(job_id=self.job_id, request_id=request_id[:200],
                       requested_by=requested_by[:MAX_REQUESTED_BY],
                       attempts_before=self.attempt, timestamp=at)
        self._dispatched(job_id=self.job_id, attempt=self.attempt + 1, not_before=at,
                         timeout_ms=int(timeout.total_seconds() * 1000), timestamp=at)

    @event("RunFailed")
    def _run_failed(self, job_id: UUID, reason: str, timestamp: datetime) -> None:
        self.status = DEAD_LETTERED

    @event("RunRedriven")
    def _redriven(self, job_id: UUID, request_id: str, requested_by: str,
                  attempts_before: int, timestamp: datetime) -> None:
        self.status = SCHEDULED
        self.attempt_base = attempts_before
