"""The job events the history keeps for the console's audit timeline: every job event but
JobFireAdvanced, worded as `cronlog audit job` words it, with the job's tenant, bounded, and
the same rows again on redelivery."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.projections.audit import timeline
from cronlog.projections.history import UnstorableEvent
from cronlog.projections.job_history import JobHistoryProjector
from cronlog.projections.job_timeline import SUMMARY_CHARS, job_event_row
from tests.support.clickhouse_history import ClickHouseLikeHistory

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def applied(job: Job, request_id: str, command: str, at: datetime) -> tuple[str, dict[str, object]]:
    return ("JobRequestApplied", {"job_id": str(job.id), "version": job.version, "at": at,
                                  "request_id": request_id, "command": command,
                                  "request_digest": "d"})


def a_paused_job() -> tuple[Job, list[tuple[str, dict[str, object]]]]:
    job = Job.create(uuid4(), JobSpec(name="n", tenant="acme", queue="q", handler="h",
                                      cron="0 * * * *"), "req-1", T0)
    events = [event_to_record(e) for e in job.collect_events()]
    events.append(applied(job, "req-1", "CreateJob", T0))
    job.fire(T0 + timedelta(hours=1))
    job.fire(T0 + timedelta(hours=2))
    events += [event_to_record(e) for e in job.collect_events()]
    job.pause("req-2", T0 + timedelta(hours=3))
    events += [event_to_record(e) for e in job.collect_events()]
    events.append(applied(job, "req-2", "PauseJob", T0 + timedelta(hours=3)))
    return job, events


def test_every_job_event_but_the_fires_is_kept_worded_as_the_audit_words_it() -> None:
    job, events = a_paused_job()
    store = ClickHouseLikeHistory()
    JobHistoryProjector(store).apply_batch(events)
    rows = store.job_events
    assert [(r.event_type, r.version) for r in rows] == [
        ("JobCreated", 1), ("JobRequestApplied", 1), ("JobPaused", 4), ("JobRequestApplied", 4)]
    assert {r.tenant for r in rows} == {"acme"} and {r.job_id for r in rows} == {str(job.id)}
    audit = {(e.event, e.version): e for e in timeline(
        [(n, r) for n, r in events if n != "JobFireAdvanced"])}
    for row in rows:
        entry = audit[(row.event_type, row.version)]
        assert (row.actor, row.summary) == (entry.actor, entry.details)
    assert rows[0].request_id == "req-1" and rows[0].actor == "request req-1"
    assert rows[0].summary.startswith("next_fire_at=")
    assert rows[3].summary == "command=PauseJob"
    assert rows[2].at_us == int((T0 + timedelta(hours=3)).timestamp() * 1_000_000)


def test_a_later_batch_finds_the_tenant_in_the_job_history_and_redelivery_writes_the_same_rows(
        ) -> None:
    job, events = a_paused_job()
    store = ClickHouseLikeHistory()
    JobHistoryProjector(store).apply_batch(events[:2])
    # A trigger: the job's log says only that the request was applied.
    trigger = applied(job, "req-3", "TriggerJob", T0 + timedelta(hours=4))
    JobHistoryProjector(store).apply_batch([*events[2:], trigger])
    first = list(store.job_events)
    JobHistoryProjector(store).apply_batch([*events, trigger])  # redelivered after a restart
    again = store.job_events[len(first):]
    assert again == first
    assert first[-1].event_type == "JobRequestApplied" and first[-1].tenant == "acme"
    assert first[-1].summary == "command=TriggerJob"


def test_an_event_of_a_job_the_history_never_saw_gets_no_row() -> None:
    job, _ = a_paused_job()
    store = ClickHouseLikeHistory()
    JobHistoryProjector(store).apply_batch([applied(job, "req-9", "TriggerJob", T0)])
    assert store.job_events == []


def test_a_long_reason_is_cut_and_an_impossible_time_is_refused() -> None:
    record = {"job_id": str(uuid4()), "version": 7, "at": T0, "tenant": "acme",
              "first": T0, "last": T0, "count": 1, "reason": "x" * 5000}
    row = job_event_row("JobFireTimesMissed", record, "acme")
    assert len(row.summary) == SUMMARY_CHARS and row.summary.endswith("…")
    with pytest.raises(UnstorableEvent):
        job_event_row("JobPaused", {"job_id": str(uuid4()), "version": 2,
                                    "at": datetime(1960, 1, 1, tzinfo=UTC)}, "acme")
