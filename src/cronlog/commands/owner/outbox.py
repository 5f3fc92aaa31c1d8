"""The outbox: what one owner cycle writes (events, dispatches, dead letters, withdrawals,
alerts, replies, in one Kafka transaction), and, once committed, the events applied to the
state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cronlog.commands.owner import alerts
from cronlog.commands.owner import owner_messages as messages
from cronlog.commands.owner.dependencies import Dependencies
from cronlog.commands.owner.owner_cycle import Cycle
from cronlog.commands.owner.ports import (
    EventRecords,
    Outgoing,
    OwnerStore,
    PartitionEvents,
    Produced,
    Topics,
)
from cronlog.commands.owner.set_aside import OUTSIDE_FAILURES, JobFailed
from cronlog.domain.catalogue import RunEvent
from cronlog.domain.run import Run


class Outbox:
    def __init__(self, store: OwnerStore, records: EventRecords, topics: Topics,
                 dependencies: Dependencies) -> None:
        self._store = store
        self._records = records
        self._topics = topics
        self._dependencies = dependencies

    def outgoing(self, cycle: Cycle) -> list[Outgoing]:
        out: list[Outgoing] = []
        # try/except inline rather than blaming(): this runs for every job and run a cycle
        # touches, and a context manager costs a generator each time.
        for job in cycle.jobs.values():
            try:
                events = job.collect_events()
                if not events:
                    continue
                key = str(job.id)
                for event in events:
                    name, record = self._records.to_record(event)
                    out.append(Outgoing(self._topics.job_events, key, name, record))
                    if job.spec.notify is not None:
                        raised = alerts.job_event_alert(self._topics, job, name, record)
                        if raised is not None:
                            out.append(raised)
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                raise JobFailed(job.id, job.spec.tenant, exc) from exc
        for run in list(cycle.runs.values()):
            try:
                out.extend(self._run_outgoing(run, cycle))
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                raise JobFailed(run.job_id, run.tenant, exc) from exc
        out.extend(cycle.relays)
        out.extend(cycle.alerts)
        out.extend(cycle.replies)
        return out

    def _run_outgoing(self, run: Run, cycle: Cycle) -> list[Outgoing]:
        out: list[Outgoing] = []
        names: list[str] = []
        record: dict[str, Any] = {}
        key = str(run.job_id)
        for event in run.collect_events():
            name, record = self._records.to_record(event)
            names.append(name)
            out.append(Outgoing(self._topics.run_events, key, name, record))
            if name == RunEvent.FAILED:
                out.extend(messages.dead_letter(self._topics, run, record,
                                                cycle.job(run.job_id)))
            elif name in alerts.RUN_FACTS:
                out.extend(alerts.run_event_alerts(self._topics, run, name, record,
                                                   cycle.job(run.job_id)))
            if name == RunEvent.ATTEMPT_DISPATCHED or (name == RunEvent.SCHEDULED and record.get("attempt")):
                owner_job = cycle.job(run.job_id)
                if owner_job is None:
                    raise LookupError(f"run {run.id} dispatched for unknown job {run.job_id}")
                out.append(messages.dispatch(self._topics, run, owner_job, record))
            if name == RunEvent.ATTEMPT_CANCELLED or (name == RunEvent.ATTEMPT_LOST
                                              and run.id in cycle.never_started):
                # A worker still holding the dispatch must drop it, not start it late.
                queue = cycle.dispatched_to.get(run.id) or self._queue_of(run, cycle)
                out.append(messages.cancel_attempt(self._topics, queue, run, record))
        if names:
            out.extend(self._dependencies.ended(run, names, record["at"], cycle))
        return out

    def _queue_of(self, run: Run, cycle: Cycle) -> str:
        job = cycle.job(run.job_id)
        return job.spec.queue if job is not None else run.queue

    def apply(self, produced: Sequence[Produced], epochs: Mapping[int, int]) -> None:
        """Applies committed events to the state, fenced by each partition's epoch."""
        by_partition: dict[int, tuple[list[Produced], list[Produced]]] = {}
        for p in produced:
            if p.topic == self._topics.job_events:
                by_partition.setdefault(p.partition, ([], []))[0].append(p)
            elif p.topic == self._topics.run_events:
                by_partition.setdefault(p.partition, ([], []))[1].append(p)
        batches = []
        for partition, (job_events, run_events) in by_partition.items():
            epoch = epochs.get(partition)
            if epoch is None:
                # Events for a partition this owner no longer holds: the next owner's
                # catch-up applies them from the log.
                continue
            job_events.sort(key=lambda e: e.offset)
            run_events.sort(key=lambda e: e.offset)
            batches.append(PartitionEvents(partition, epoch, job_events, run_events))
        # One state transaction for the cycle: with 1,024 partitions a cycle touches
        # hundreds, and a transaction (and a commit's flush) each made the apply take
        # seconds (the scale bench: 6-9 s for a cycle of 2,000 creations).
        if batches:
            self._store.apply(batches)
