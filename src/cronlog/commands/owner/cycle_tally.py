"""Counts what one owner cycle committed, for operators (OwnerMetrics) and the owner's
periodic log line.

Counted from the committed messages, not where the decisions are made: a cycle decided
again without a bad message, or not committed, would otherwise count twice or count what
never happened. One pass over the cycle's messages, a few dict operations per run: the owner
commits thousands of runs a second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from uuid import UUID

from cronlog.commands.owner.ports import CycleTally, Produced, Topics
from cronlog.domain.catalogue import RunEvent
from cronlog.domain.ids import as_uuid
from cronlog.domain.job import Job
from cronlog.domain.run import Run

CREATED = "created"
MISSED = "missed"
SKIPPED = "skipped"
DEAD_LETTERED = "dead_lettered"
# Run events whose record names the run's queue.
RECORDED: dict[str, str] = {RunEvent.SCHEDULED: CREATED, RunEvent.MISSED: MISSED,
            RunEvent.SKIPPED: SKIPPED}
# A run's end: the final status it is counted under. A succeeded attempt ends its run in
# one event (the owner no longer writes RunSucceeded, only old logs hold it).
ENDED: dict[str, str] = {RunEvent.ATTEMPT_SUCCEEDED: "succeeded", RunEvent.FAILED: "failed",
         RunEvent.CANCELLED: "cancelled"}
# An ended run this owner no longer holds in the cycle (it cannot happen today): counted,
# under a queue of its own rather than not at all.
UNKNOWN_QUEUE = "unknown"
# Runs whose start the lookahead decides; a manual or dependency run starts when it is
# asked for, so its lead says nothing about the owner (nor does a run of a job that fires
# only when due, Job.fires_ahead: its lead is never positive).
SCHEDULE_TRIGGER = "schedule"


def tally(produced: Sequence[Produced], topics: Topics, runs: Mapping[UUID, Run],
          jobs: Mapping[UUID, Job], committed_at: datetime) -> CycleTally:
    """`runs` and `jobs`: the cycle's (for the queue of ended runs, whose events do not
    name it, and whether a fired job fires ahead); `committed_at`: when the cycle's
    transaction committed, which is when workers could read its dispatches."""
    counted = CycleTally()
    leads = counted.leads
    # By kind, then queue: no key built per run.
    by_kind: dict[str, dict[str, int]] = {}
    # Usually none: every job fires ahead unless its overlap policy says otherwise.
    when_due = {job_id for job_id, job in jobs.items() if not job.fires_ahead}
    run_events, job_events = topics.run_events, topics.job_events
    for message in produced:
        topic = message.topic
        if topic == run_events:
            counted.events += 1
            name = message.name
            kind = RECORDED.get(name)
            if kind is None:
                kind = ENDED.get(name)
                if kind is None:
                    continue
                run = runs.get(as_uuid(message.record["run_id"]))
                queue = run.queue if run is not None else UNKNOWN_QUEUE
            else:
                record = message.record
                queue = record["queue"]
                # Fired and dispatched in this cycle (a held or waiting run has no attempt).
                if kind == CREATED and record.get("attempt") \
                        and record.get("trigger") == SCHEDULE_TRIGGER \
                        and not (when_due and as_uuid(record["job_id"]) in when_due):
                    left = (record["not_before"] - committed_at).total_seconds()
                    of_queue = leads.get(queue)
                    if of_queue is None:
                        leads[queue] = [left]
                    else:
                        of_queue.append(left)
        elif topic == job_events:
            counted.events += 1
            continue
        elif topic == topics.dead_letters:
            kind, queue = DEAD_LETTERED, message.record["queue"]
        elif topic == topics.poison:
            counted.set_aside += 1
            continue
        else:
            if topic == topics.replies and not message.record.get("ok"):
                counted.refused[str(message.record.get("error_code") or "UNKNOWN")] += 1
            continue
        of_kind = by_kind.get(kind)
        if of_kind is None:
            of_kind = by_kind[kind] = {}
        of_kind[queue] = of_kind.get(queue, 0) + 1
    for kind, of_kind in by_kind.items():
        for queue, count in of_kind.items():
            counted.runs[(kind, queue)] = count
    return counted
