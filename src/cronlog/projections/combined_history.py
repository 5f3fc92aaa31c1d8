"""Routes a batch from both event topics to the run history and the job history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cronlog.projections.history_loop import BatchProjector


class CombinedHistoryProjector:
    def __init__(self, runs: BatchProjector, jobs: BatchProjector) -> None:
        self._runs = runs
        self._jobs = jobs

    def apply_batch(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        # A calendar's events (issue 20) are on the job-events topic too; the job history
        # skips them.
        job_events = [e for e in events if e[0].startswith(("Job", "Calendar"))]
        run_events = [e for e in events if not e[0].startswith(("Job", "Calendar"))]
        # Jobs first: a run's analytics may join on its job.
        if job_events:
            self._jobs.apply_batch(job_events)
        if run_events:
            self._runs.apply_batch(run_events)
