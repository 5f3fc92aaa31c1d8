"""An attempt's progress (docs/handlers.md, "Heartbeats and progress"): what its handler's
heartbeats said of how far it got, recorded so that the run's history shows it.

A base class of the Run aggregate, so that AttemptProgressed stays the Run's event. It
changes nothing of the run's state: progress is shown, never decided on.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from eventsourcing.domain import event

from cronlog.domain.aggregate import CronlogAggregate
from cronlog.domain.bounds import MAX_PROGRESS_BYTES, in_range
from cronlog.domain.run_states import ATTEMPT_RUNNING, TERMINAL_RUN


class AttemptProgress(CronlogAggregate):
    if TYPE_CHECKING:  # the Run's, declared there (an annotation here would be an event field)
        job_id: UUID
        status: str
        attempt: int
        attempt_status: str

    def progress(self, attempt: int, worker: str, details: bytes, progressed_at: datetime,
                 at: datetime) -> bool:
        """Records the running attempt's last progress: the details of a heartbeat its
        handler gave at progressed_at (by its worker's clock; `at` when that is out of
        range), cut to MAX_PROGRESS_BYTES (a worker of another version may send more). Any
        other attempt's is too late and records nothing."""
        if attempt != self.attempt or self.attempt_status != ATTEMPT_RUNNING \
                or self.status in TERMINAL_RUN:
            return False
        if not in_range(progressed_at):
            # A worker's clock far off: the history could not store it, and every later
            # event of the run would carry it on the attempt's row. Ours stands in.
            progressed_at = at
        self._progressed(job_id=self.job_id, attempt=attempt, worker=worker,
                         details=details[:MAX_PROGRESS_BYTES], progressed_at=progressed_at,
                         timestamp=at)
        return True

    @event("AttemptProgressed")
    def _progressed(self, job_id: UUID, attempt: int, worker: str, details: bytes,
                    progressed_at: datetime, timestamp: datetime) -> None:
        pass
