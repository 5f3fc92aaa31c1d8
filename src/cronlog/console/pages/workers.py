"""The workers page: the live workers the signed-in tenant may see, with their queues,
handlers and slots (docs/workers.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cronlog.console.ports import Credentials, JobsApi
from cronlog.fleet.announcement import WorkerAnnouncement


@dataclass(frozen=True)
class WorkerRow:
    worker: WorkerAnnouncement
    # Seconds since it last announced itself.
    seen_seconds_ago: int


@dataclass(frozen=True)
class WorkersView:
    rows: Sequence[WorkerRow]
    slots: int
    slots_in_use: int


def workers_view(api: JobsApi, who: Credentials, now: datetime) -> WorkersView:
    """One ListWorkers call: at most 2,000 workers (the api's bound)."""
    workers = api.list_workers(who)
    rows = [WorkerRow(w, max(0, int((now - w.at).total_seconds()))) for w in workers]
    return WorkersView(rows, sum(w.slots for w in workers),
                       sum(w.slots_in_use for w in workers))
