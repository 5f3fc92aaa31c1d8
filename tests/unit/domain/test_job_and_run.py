from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from cronlog.domain.errors import ClockReadForbidden, JobNotActive
from cronlog.domain.ids import job_id_for_request, run_id_for
from cronlog.domain.job import Job
from cronlog.domain.policies import RetryPolicy
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec

NOW = datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)
SPEC = JobSpec(name="n", tenant="t", queue="default", handler="echo", cron="*/2 * * * * *",
               time_zone="Asia/Kolkata")


def names(events: object) -> list[str]:
    return [type(e).__name__ for e in events]  # type: ignore[attr-defined]


def test_ids_are_deterministic() -> None:
    assert job_id_for_request("t", "r1") == job_id_for_request("t", "r1")
    assert job_id_for_request("t", "r1") != job_id_for_request("u", "r1")
    job_id = uuid4()
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert run_id_for(job_id, at) == run_id_for(job_id, at.astimezone(
        __import__("zoneinfo").ZoneInfo("Asia/Tokyo")))
    assert run_id_for(job_id, at) != run_id_for(job_id, at + timedelta(microseconds=1))


def test_create_then_fire_advances_and_creates_one_run_per_fire_time() -> None:
    job = Job.create(uuid4(), SPEC, "r1", NOW)
    assert job.next_fire_at == datetime(2026, 1, 1, 12, 0, 2, tzinfo=UTC)
    first = job.fire(NOW)
    second = job.fire(NOW)
    assert first.scheduled_at == datetime(2026, 1, 1, 12, 0, 2, tzinfo=UTC)
    assert second.scheduled_at == datetime(2026, 1, 1, 12, 0, 4, tzinfo=UTC)
    assert first.id == run_id_for(job.id, first.scheduled_at)
    assert names(job.collect_events()) == ["JobCreated", "JobFireAdvanced", "JobFireAdvanced"]
    # The run's first attempt is dispatched in the event that creates it.
    assert names(first.collect_events()) == ["RunScheduled"]
    assert (first.attempt, first.attempt_status) == (1, "dispatched")


def test_one_off_fires_once_then_completes() -> None:
    spec = JobSpec(name="n", tenant="t", queue="q", handler="echo", at=NOW - timedelta(hours=1))
    job = Job.create(uuid4(), spec, "r", NOW)
    assert job.next_fire_at == NOW - timedelta(hours=1)
    job.fire(NOW)
    assert job.status == "completed"
    assert names(job.collect_events())[-1] == "JobCompleted"
    with pytest.raises(JobNotActive):
        job.fire(NOW)


def test_events_never_read_the_clock() -> None:
    job = Job.create(uuid4(), SPEC, "r1", NOW)
    with pytest.raises(ClockReadForbidden):
        job.trigger_event(Job.JobPaused, request_id=None)  # type: ignore[attr-defined]
    assert all(e.timestamp == NOW for e in job.collect_events())


def test_duplicate_and_stale_reports_produce_no_events() -> None:
    job = Job.create(uuid4(), SPEC, "r1", NOW)
    run = job.fire(NOW)
    run.collect_events()
    assert run.start(1, "w1", NOW, NOW)
    assert not run.start(1, "w1", NOW, NOW)
    assert not run.start(2, "w1", NOW, NOW)
    assert run.succeed(1, "w1", NOW, b"ok", False, NOW)
    assert not run.succeed(1, "w1", NOW, b"ok", False, NOW)
    policy = RetryPolicy()
    assert not run.fail(1, "w1", NOW, "X: late", b"", False, NOW, policy, timedelta(seconds=1), 0.5)
    # A succeeded attempt ends its run.
    assert names(run.collect_events()) == ["AttemptStarted", "AttemptSucceeded"]
    assert run.status == "succeeded"


def test_failures_retry_with_backoff_then_fail_the_run() -> None:
    job = Job.create(uuid4(), SPEC, "r1", NOW)
    run = job.fire(NOW)
    policy = RetryPolicy(max_attempts=2, initial_backoff=timedelta(seconds=4), jitter=0.0)
    assert run.fail(1, "w", NOW, "Boom: x", b"", False, NOW, policy, timedelta(seconds=9), 0.3)
    assert run.attempt == 2
    assert run.not_before == NOW + timedelta(seconds=4)
    assert run.fail(2, "w", NOW, "Boom: y", b"", False, NOW, policy, timedelta(seconds=9), 0.3)
    assert run.status == "dead_lettered"
    assert names(run.collect_events())[-4:] == ["AttemptFailed", "AttemptDispatched",
                                                "AttemptFailed", "RunFailed"]


def test_non_retryable_error_fails_at_once() -> None:
    run = Job.create(uuid4(), SPEC, "r1", NOW).fire(NOW)
    policy = RetryPolicy(non_retryable_errors=("Fatal",))
    run.fail(1, "w", NOW, "Fatal: no", b"", False, NOW, policy, timedelta(seconds=1), 0.1)
    assert run.status == "dead_lettered"


def test_aggregates_rebuild_from_their_events_and_from_a_snapshot() -> None:
    job = Job.create(uuid4(), SPEC, "r1", NOW)
    run = job.fire(NOW)
    run.start(1, "w", NOW, NOW)
    replayed: Run | None = None
    for event in run.collect_events():
        replayed = event.mutate(replayed)
    assert replayed is not None and replayed.status == "running" and replayed.version == 2
    restored = Job.restore(job.id, job.version, NOW, NOW, spec=job.spec, status=job.status,
                           next_fire_at=job.next_fire_at, last_fired_at=job.last_fired_at)
    assert restored.fire(NOW).scheduled_at == job.fire(NOW).scheduled_at


def test_update_checks_the_expected_version_and_trigger_makes_a_manual_run() -> None:
    from cronlog.domain.errors import InvalidSpec, StaleVersion
    from cronlog.domain.ids import manual_run_id

    job = Job.create(uuid4(), SPEC, "r1", NOW)
    with pytest.raises(StaleVersion):
        job.update(SPEC, "r2", NOW, expected_version=7)
    with pytest.raises(InvalidSpec):
        job.update(JobSpec(**{**SPEC.__dict__, "tenant": "other"}), "r2", NOW)
    job.update(JobSpec(**{**SPEC.__dict__, "payload": b"new"}), "r2", NOW, expected_version=1)
    assert job.spec.payload == b"new" and job.version == 2
    run = job.trigger("r3", NOW)
    assert run.id == manual_run_id(job.id, "r3") and run.trigger == "manual"
    job.delete("r4", NOW)
    with pytest.raises(JobNotActive):
        job.trigger("r5", NOW)


def test_the_version_users_see_moves_with_spec_and_status_not_with_fires() -> None:
    from cronlog.domain.errors import StaleVersion

    job = Job.create(uuid4(), SPEC, "r1", NOW)
    assert job.revision == 1
    for _ in range(5):
        job.fire(NOW)
    assert job.version == 6 and job.revision == 1, "five fires leave the revision"
    job.update(JobSpec(**{**SPEC.__dict__, "payload": b"new"}), "r2", NOW, expected_version=1)
    assert job.revision == job.version == 7
    job.fire(NOW)
    with pytest.raises(StaleVersion, match="at version 7, not 1"):
        job.update(SPEC, "r3", NOW, expected_version=1)
    job.pause("r4", NOW)
    assert job.revision == job.version == 9
    job.resume("r5", NOW)
    job.delete("r6", NOW)
    assert job.revision == job.version == 11
    # The projection's row gives a restored job the same revision.
    restored = Job.restore(job.id, job.version, NOW, NOW, spec=job.spec, status=job.status,
                           next_fire_at=None, last_fired_at=None, revision=job.revision)
    assert restored.revision == 11
    replayed: Job | None = None
    for event in job.collect_events():
        replayed = event.mutate(replayed)
    assert replayed is not None and replayed.revision == 11, "the log gives the same"


def test_misfire_policies_after_a_pause() -> None:
    from cronlog.domain.policies import MisfirePolicy

    outcomes = {}
    for policy in MisfirePolicy:
        spec = JobSpec(name="n", tenant="t", queue="q", handler="h", cron="* * * * *",
                       misfire_policy=policy)
        job = Job.create(uuid4(), spec, "r", NOW)
        job.pause("p", NOW)
        later = NOW + timedelta(minutes=5, seconds=30)
        job.resume("q", later)
        runs = job.fire_due(later, later + timedelta(seconds=2), timedelta(seconds=60))
        # Missed fire times are one range event (first, last, count) on the job.
        missed: list[Any] = [e for e in job.collect_events()
                             if type(e).__name__ == "JobFireTimesMissed"]
        outcomes[policy] = ["missed"] * sum(e.count for e in missed) + [
            r.status for r in runs]
        minutes = [m for e in missed for m in range(e.first.minute, e.last.minute + 1)]
        assert minutes + [r.scheduled_at.minute for r in runs] == [1, 2, 3, 4, 5], \
            "none dropped"
    assert outcomes[MisfirePolicy.RUN_ALL] == ["scheduled"] * 5
    # 12:04 is the latest fire time more than a minute late; 12:05 is just late.
    assert outcomes[MisfirePolicy.RUN_LATEST] == ["missed"] * 3 + ["scheduled"] * 2
    assert outcomes[MisfirePolicy.SKIP] == ["missed"] * 4 + ["scheduled"]


def test_a_paused_one_off_that_never_ran_still_runs_after_resume() -> None:
    spec = JobSpec(name="n", tenant="t", queue="q", handler="h", at=NOW + timedelta(seconds=5))
    job = Job.create(uuid4(), spec, "r", NOW)
    job.pause("p", NOW)
    job.resume("q", NOW + timedelta(hours=1))
    assert job.next_fire_at == NOW + timedelta(seconds=5)


def test_spread_gives_each_job_a_fixed_offset_within_its_window() -> None:
    from cronlog.domain.run_states import spread_offset

    window = timedelta(minutes=5)
    offsets = set()
    for _ in range(50):
        spec = JobSpec(name="n", tenant="t", queue="q", handler="h", cron="0 * * * *",
                       spread=window)
        job = Job.create(uuid4(), spec, "r", NOW)
        first, second = job.fire(NOW), job.fire(NOW)
        offset = first.not_before - first.scheduled_at
        assert timedelta(0) <= offset < window
        assert second.not_before - second.scheduled_at == offset == spread_offset(job.id, window)
        assert job.trigger("manual", NOW).not_before == NOW, "a manual run starts now"
        offsets.add(offset)
    assert len(offsets) > 40, "jobs are spread over the window"


def test_runs_apart_tells_one_off_and_sparse_cron_jobs_from_dense_ones() -> None:
    gap = timedelta(seconds=60)

    def job(**schedule: Any) -> Job:
        return Job.create(uuid4(), JobSpec(name="n", tenant="t", queue="q", handler="h",
                                           **schedule), "r", NOW)

    assert job(at=NOW + timedelta(seconds=30)).runs_apart(gap)
    assert job(cron="* * * * *").runs_apart(gap)
    assert job(cron="0 0 * * *").runs_apart(gap)
    every_2s = job(cron="*/2 * * * * *")
    assert not every_2s.runs_apart(gap), "judged by the interval after, before it ever fired"
    every_2s.fire(NOW)
    assert not every_2s.runs_apart(gap)
    # 00:00:00 and 00:00:30 each day: neither is 60 s from both neighbours.
    twice = job(cron="0,30 0 0 * * *")
    assert not twice.runs_apart(gap), "followed 30 s later"
    twice.fire(NOW)
    assert not twice.runs_apart(gap), "30 s after the last one"
    twice.fire(NOW)
    assert not twice.runs_apart(gap), "followed 30 s later again"
    hourly = job(cron="0 0 * * * *")
    hourly.fire(NOW)
    assert hourly.runs_apart(gap)
