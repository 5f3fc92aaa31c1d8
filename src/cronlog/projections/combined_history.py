"""Routes a batch from both event topics to the run history and the job history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cronlog.domain.catalogue import CalendarEvent, ChannelEvent, JobEvent
from cronlog.projections.history_loop import BatchProjector

# What the job-events topic carries: a job's events, and a calendar's (issue 20) and an
# alert channel's (issue 37), keyed by their own ids, which the job history skips.
JOB_EVENTS_TOPIC = frozenset({*JobEvent, *CalendarEvent, *ChannelEvent})


def _of_job_events(name: str) -> bool:
    # An unknown Job… name still goes to the job history, which refuses it.
    return name in JOB_EVENTS_TOPIC or name.startswith("Job")


class CombinedHistoryProjector:
    def __init__(self, runs: BatchProjector, jobs: BatchProjector) -> None:
        self._runs = runs
        self._jobs = jobs

    def apply_batch(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        job_events = [e for e in events if _of_job_events(e[0])]
        run_events = [e for e in events if not _of_job_events(e[0])]
        # Jobs first: a run's analytics may join on its job.
        if job_events:
            self._jobs.apply_batch(job_events)
        if run_events:
            self._runs.apply_batch(run_events)
