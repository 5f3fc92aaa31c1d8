"""The run history against the log (verify --projections): rows folded from the runs' own
events by the history projector hold; a row changed behind the projector's back, or missing,
is named with its run; a newer row (events since the log was read) is not."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import uuid4

from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.verification.findings import Check
from cronlog.verification.history_check import compare_history, expected_history
from tests.support.verify_log import EventLog

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def three_runs() -> tuple[EventLog, Job]:
    log = EventLog()
    job = Job.create(uuid4(), JobSpec(name="n", tenant="acme", queue="default",
                                      handler="echo", cron="0 * * * *"), "create", T0)
    log.take(job)
    log.fire_and_run(job, T0 + timedelta(hours=3))
    return log, job


def test_the_rows_the_projector_makes_of_the_events_hold() -> None:
    log, _ = three_runs()
    expected = expected_history(log.run_events)
    assert len(expected) == 3
    assert all([r.attempt_status for r in rows] == ["succeeded"] for rows in expected.values())
    assert compare_history(expected, expected_history(log.run_events)) == []


def test_a_changed_or_missing_row_is_named_and_a_newer_one_is_not() -> None:
    log, job = three_runs()
    expected = expected_history(log.run_events)
    first, second, third = sorted(expected, key=lambda r: expected[r][0].scheduled_at_us)
    live = dict(expected)
    live[first] = [replace(expected[first][0], attempt_status="failed", run_status="failed")]
    del live[second]
    live[third] = [replace(expected[third][0], version=99, run_status="failed")]
    found = compare_history(expected, live)
    assert [(v.check, v.run_id) for v in found] == [(Check.PROJECTION_DIFFERS, r)
                                                     for r in sorted((first, second))]
    changed = next(v for v in found if v.run_id == first)
    assert changed.job_id == str(job.id) and changed.fire_time == T0 + timedelta(hours=1)
    assert "attempt 1 failed (run failed) where the log gives attempt 1 succeeded" in \
        changed.detail


def test_only_runs_created_in_what_was_read_and_the_latest_are_compared() -> None:
    log, _ = three_runs()
    # The events of the first run without its creation: it cannot be folded.
    events = next(iter(log.run_events.values()))
    creation = next(i for i, (name, _) in enumerate(events) if name == "RunScheduled")
    run_id = str(events[creation][1]["run_id"])
    del events[creation]
    assert run_id not in expected_history(log.run_events)
    assert len(expected_history(log.run_events, most_runs=1)) == 1
