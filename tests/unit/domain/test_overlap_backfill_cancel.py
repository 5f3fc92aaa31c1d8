"""Overlap policies, backfills and cancellation on the Job and Run aggregates."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.domain.errors import InvalidSpec, JobNotActive
from cronlog.domain.held_runs import next_to_release
from cronlog.domain.ids import backfill_run_id, run_id_for
from cronlog.domain.job import Job
from cronlog.domain.policies import OverlapPolicy
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=60)
SPEC = JobSpec(name="n", tenant="t", queue="default", handler="echo", cron="* * * * * *",
               time_zone="UTC")


def job_with(policy: OverlapPolicy) -> Job:
    job = Job.create(uuid4(), dataclasses.replace(SPEC, overlap_policy=policy), "r1",
                     T0 - timedelta(milliseconds=500))
    job.collect_events()
    return job


def fire_at(job: Job, second: int, unfinished: list[Run]) -> list[Run]:
    now = T0 + timedelta(seconds=second)
    return job.fire_due(now, now, WINDOW, unfinished=unfinished)


def names(run: Run) -> list[str]:
    return [type(e).__name__ for e in run.collect_events()]


def start(run: Run) -> None:
    assert run.start(1, "w", T0, T0)


def test_allow_runs_every_fire_time_alongside_the_others() -> None:
    job = job_with(OverlapPolicy.ALLOW)
    unfinished: list[Run] = []
    first = fire_at(job, 0, unfinished)
    second = fire_at(job, 1, unfinished)
    assert len(first) == len(second) == 1
    assert job.fires_ahead
    assert [r.status for r in unfinished] == ["scheduled", "scheduled"]


def test_skip_records_the_fire_time_as_skipped_while_a_run_is_going() -> None:
    job = job_with(OverlapPolicy.SKIP)
    assert not job.fires_ahead
    unfinished: list[Run] = []
    (first,) = fire_at(job, 0, unfinished)
    start(first)
    (skipped,) = fire_at(job, 1, unfinished)
    assert skipped.status == "skipped" and skipped.finished
    assert skipped.id == run_id_for(job.id, T0 + timedelta(seconds=1))
    assert "overlap policy skip" in next(iter(skipped.collect_events())).reason  # type: ignore[attr-defined]
    assert job.next_fire_at == T0 + timedelta(seconds=2), "the skipped fire time is passed"
    first.succeed(1, "w", T0, b"", False, T0)
    (third,) = fire_at(job, 2, unfinished)
    assert third.status == "scheduled" and third.attempt == 1


def test_buffer_one_holds_one_run_and_skips_beyond_it_then_releases_it() -> None:
    job = job_with(OverlapPolicy.BUFFER_ONE)
    unfinished: list[Run] = []
    (first,) = fire_at(job, 0, unfinished)
    start(first)
    (buffered,) = fire_at(job, 1, unfinished)
    assert buffered.held and buffered.attempt == 0
    assert "AttemptDispatched" not in names(buffered)
    (beyond,) = fire_at(job, 2, unfinished)
    assert beyond.status == "skipped"
    assert next_to_release(unfinished) is None, "the first run is still going"
    first.succeed(1, "w", T0, b"", False, T0)
    assert next_to_release(unfinished) is buffered
    assert buffered.release(timedelta(seconds=30), T0 + timedelta(seconds=3))
    assert names(buffered) == ["AttemptDispatched"]
    assert buffered.not_before == T0 + timedelta(seconds=3)
    assert not buffered.release(timedelta(seconds=30), T0), "released once"


def test_cancel_other_cancels_the_run_going_and_fires_the_new_one() -> None:
    job = job_with(OverlapPolicy.CANCEL_OTHER)
    unfinished: list[Run] = []
    (first,) = fire_at(job, 0, unfinished)
    start(first)
    first.collect_events()
    touched = fire_at(job, 1, unfinished)
    assert touched[0] is first and first.status == "cancelled"
    assert names(first) == ["AttemptCancelled", "RunCancelled"]
    assert touched[1].status == "scheduled" and unfinished == [touched[1]]


def test_cancel_tells_which_attempt_to_stop_and_is_idempotent() -> None:
    job = job_with(OverlapPolicy.ALLOW)
    (run,) = fire_at(job, 0, [])
    start(run)
    assert run.cancel("by request", T0) == 1
    assert run.cancel("again", T0) is None, "a finished run is not cancelled twice"
    assert not run.succeed(1, "w", T0, b"", False, T0), "a late report changes nothing"
    held = Run.schedule(job, T0, "backfill", T0, hold=True)
    assert held.cancel("paused", T0) == 0, "no attempt was dispatched"


def test_replace_dispatch_withdraws_an_unstarted_attempt_only() -> None:
    job = job_with(OverlapPolicy.ALLOW)
    (run,) = fire_at(job, 0, [])
    run.collect_events()
    assert run.replace_dispatch("updated", timedelta(seconds=5), T0) == 1
    assert names(run) == ["AttemptCancelled", "AttemptDispatched"] and run.attempt == 2
    start_ok = run.start(2, "w", T0, T0)
    assert start_ok
    assert run.replace_dispatch("updated", timedelta(seconds=5), T0) is None


def test_backfill_creates_runs_with_their_own_ids_held_unless_allowed() -> None:
    job = job_with(OverlapPolicy.SKIP)
    now = T0 + timedelta(hours=1)
    unfinished: list[Run] = []
    runs = job.backfill("bf-1", T0, T0 + timedelta(seconds=3), now, unfinished)
    assert [r.scheduled_at for r in runs] == [T0 + timedelta(seconds=s) for s in (1, 2, 3)]
    assert [r.id for r in runs] == [backfill_run_id(job.id, "bf-1", r.scheduled_at)
                                    for r in runs]
    assert all(r.held and r.trigger == "backfill" for r in runs)
    assert [type(e).__name__ for e in job.collect_events()] == ["JobBackfillRequested"]
    assert next_to_release(unfinished) is runs[0], "one at a time, oldest first"
    allowed = job_with(OverlapPolicy.ALLOW)
    dispatched = allowed.backfill("bf-2", T0, T0 + timedelta(seconds=2), now, [])
    assert all(r.attempt == 1 and r.not_before == now for r in dispatched)


@pytest.mark.parametrize(("after", "until", "field"), [
    (T0 + timedelta(seconds=5), T0, "until"),
    (T0, T0 + timedelta(hours=2), "until"),
    (T0, T0 + timedelta(seconds=2000), "from"),
])
def test_bad_backfill_intervals_are_refused_naming_the_field(after: datetime, until: datetime,
                                                            field: str) -> None:
    job = job_with(OverlapPolicy.ALLOW)
    with pytest.raises(InvalidSpec) as caught:
        job.backfill("bf", after, until, T0 + timedelta(hours=1), [])
    assert caught.value.field == field
    assert list(job.collect_events()) == []


def test_a_deleted_job_cannot_be_backfilled() -> None:
    job = job_with(OverlapPolicy.ALLOW)
    job.delete("d", T0)
    with pytest.raises(JobNotActive):
        job.backfill("bf", T0, T0 + timedelta(seconds=1), T0 + timedelta(hours=1), [])
