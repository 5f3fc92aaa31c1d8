"""Routes a batch from both event topics to the run history and the job history, and the
alert-deliveries topic's records (issue 37) to the delivery history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cronlog.domain.catalogue import AlertDelivery, CalendarEvent, ChannelEvent, JobEvent
from cronlog.projections.history_loop import BatchProjector

# What the job-events topic carries: a job's events, and a calendar's (issue 20) and an
# alert channel's (issue 37), keyed by their own ids, which the job history skips.
JOB_EVENTS_TOPIC = frozenset({*JobEvent, *CalendarEvent, *ChannelEvent})
ALERT_DELIVERIES_TOPIC = frozenset(AlertDelivery)


def _of_job_events(name: str) -> bool:
    # An unknown Job… name still goes to the job history, which refuses it.
    return name in JOB_EVENTS_TOPIC or name.startswith("Job")


def _of_deliveries(name: str) -> bool:
    # An unknown AlertDelivery… name still goes to the delivery history, which refuses it.
    return name in ALERT_DELIVERIES_TOPIC or name.startswith("AlertDelivery")


class CombinedHistoryProjector:
    """deliveries: the alert-deliveries topic's projector; without one, its records are
    refused as unknown run events (the feed of such a loop does not read that topic)."""

    def __init__(self, runs: BatchProjector, jobs: BatchProjector,
                 deliveries: BatchProjector | None = None) -> None:
        self._runs = runs
        self._jobs = jobs
        self._deliveries = deliveries

    def apply_batch(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        deliveries = [e for e in events if self._deliveries is not None
                      and _of_deliveries(e[0])]
        if deliveries:
            events = [e for e in events if not _of_deliveries(e[0])]
        job_events = [e for e in events if _of_job_events(e[0])]
        run_events = [e for e in events if not _of_job_events(e[0])]
        # Jobs first: a run's analytics may join on its job.
        if job_events:
            self._jobs.apply_batch(job_events)
        if run_events:
            self._runs.apply_batch(run_events)
        # Last: nothing else reads them, and a refused one leaves the others applied the
        # same way a refused run event does (the loop narrows the batch down to it).
        if deliveries and self._deliveries is not None:
            self._deliveries.apply_batch(deliveries)
