from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import event_to_record, record_to_event
from cronlog.projections.audit import job_as_of, timeline

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_timeline_names_who_did_what_and_the_job_rebuilds_as_of_any_instant() -> None:
    spec = JobSpec(name="n", tenant="t", queue="q", handler="h", cron="0 * * * *")
    job = Job.create(uuid4(), spec, "req-1", T0)
    run = job.fire(T0 + timedelta(minutes=59))
    job.pause("req-2", T0 + timedelta(hours=2))
    job_events = [event_to_record(e) for e in job.collect_events()]
    run_events = [event_to_record(e) for e in run.collect_events()]
    entries = timeline([*job_events, *run_events])
    assert [e.event for e in entries] == ["JobCreated", "JobFireAdvanced", "RunScheduled",
                                          "JobPaused"]
    assert entries[0].actor == "request req-1"
    assert entries[-1].actor == "request req-2"
    assert job_as_of(job_events, T0 - timedelta(seconds=1), record_to_event) is None
    before_pause = job_as_of(job_events, T0 + timedelta(hours=1), record_to_event)
    assert before_pause.status == "active" and before_pause.version == 2
    assert before_pause.next_fire_at == T0 + timedelta(hours=2)
    now = job_as_of(job_events, T0 + timedelta(hours=3), record_to_event)
    assert now.status == "paused" and now.version == 3
