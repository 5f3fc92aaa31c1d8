"""Restoring a job (issue 38): the spec of an earlier version given back as a new event, a
deleted job brought back with its missed fire times under its misfire policy or skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.job import Job
from cronlog.domain.policies import MisfirePolicy
from cronlog.domain.spec import JobSpec

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOURLY = JobSpec(name="billing", tenant="acme", queue="default", handler="echo",
                 cron="0 * * * *", time_zone="UTC", misfire_policy=MisfirePolicy.SKIP)
DAILY = JobSpec(name="billing", tenant="acme", queue="default", handler="echo",
                cron="0 3 * * *", time_zone="UTC")


def names(job: Job) -> list[str]:
    return [type(e).__name__ for e in job.collect_events()]


def deleted_job() -> Job:
    """Created at NOW (version 1), updated to DAILY (2), fired once (03:00), deleted (3)."""
    job = Job.create(uuid4(), HOURLY, "r1", NOW)
    job.update(DAILY, "r2", NOW + timedelta(minutes=1))
    job.fire(NOW + timedelta(hours=15))  # 2026-03-02 03:00
    job.delete("r3", NOW + timedelta(hours=16))
    job.collect_events()
    return job


def test_a_deleted_job_comes_back_with_the_spec_of_the_version_asked_for() -> None:
    job = deleted_job()
    assert (job.status, job.revision) == ("deleted", 4)  # the fire does not move it
    at = NOW + timedelta(days=3)
    job.restore_to(1, HOURLY, "r4", at)
    assert job.status == "active" and job.spec == HOURLY
    assert job.revision == job.version, "the restore is a version of its own"
    # From its last fire time on: the hours since the delete are overdue, for its misfire
    # policy to record (SKIP) when the owner meets them.
    assert job.next_fire_at == datetime(2026, 3, 2, 4, tzinfo=UTC)
    runs = job.fire_due(at, at, timedelta(seconds=15))
    # The overdue hours recorded missed as one range; the hour that is now runs.
    assert [r.scheduled_at for r in runs] == [at]
    missed, fired = job.collect_events()[1:]
    assert type(missed).__name__ == "JobFireTimesMissed"
    assert (missed.first, missed.count) == (  # type: ignore[attr-defined]
        datetime(2026, 3, 2, 4, tzinfo=UTC), 56)
    assert type(fired).__name__ == "JobFireAdvanced"
    assert job.next_fire_at == datetime(2026, 3, 4, 13, tzinfo=UTC)


def test_skip_missed_goes_on_from_now() -> None:
    job = deleted_job()
    at = NOW + timedelta(days=3, minutes=30)
    job.restore_to(2, DAILY, "r4", at, skip_missed=True)
    assert job.next_fire_at == datetime(2026, 3, 5, 3, tzinfo=UTC)
    assert job.fire_due(at, at, timedelta(seconds=15)) == []
    assert names(job) == ["JobRestored"]


def test_a_live_job_is_rolled_back_from_now_and_keeps_its_status() -> None:
    job = Job.create(uuid4(), HOURLY, "r1", NOW)
    job.update(DAILY, "r2", NOW)
    job.pause("r3", NOW)
    at = NOW + timedelta(minutes=10)
    job.restore_to(1, HOURLY, "r4", at)
    assert job.status == "paused" and job.spec == HOURLY
    assert job.next_fire_at == datetime(2026, 3, 1, 13, tzinfo=UTC)


def test_a_completed_one_off_that_never_ran_runs_when_restored() -> None:
    once = JobSpec(name="once", tenant="acme", queue="default", handler="echo",
                   at=NOW + timedelta(hours=1))
    job = Job.create(uuid4(), once, "r1", NOW)
    job.fire(NOW + timedelta(hours=1))
    assert job.status == "completed"
    job.restore_to(1, once, "r2", NOW + timedelta(hours=2))
    # It fired already: nothing after its one fire time, so it stays completed.
    assert job.status == "completed" and job.next_fire_at is None
    never = Job.create(uuid4(), once, "r1", NOW)
    never.delete("r2", NOW)
    never.restore_to(1, once, "r3", NOW + timedelta(hours=2))
    assert never.status == "active" and never.next_fire_at == once.at


@pytest.mark.parametrize("version", [0, 5, -1])
def test_a_version_the_job_never_had_is_refused_naming_the_field(version: int) -> None:
    job = deleted_job()
    with pytest.raises(InvalidSpec) as refused:
        job.restore_to(version, HOURLY, "r4", NOW)
    assert refused.value.field == "version"
    assert job.collect_events() == []


def test_a_spec_of_another_tenant_is_refused() -> None:
    job = deleted_job()
    other = JobSpec(name="billing", tenant="other", queue="default", handler="echo",
                    cron="0 * * * *", time_zone="UTC")
    with pytest.raises(InvalidSpec) as refused:
        job.restore_to(1, other, "r4", NOW)
    assert refused.value.field == "spec.tenant"


def test_a_restored_job_replays_from_its_events() -> None:
    job = Job.create(uuid4(), HOURLY, "r1", NOW)
    job.update(DAILY, "r2", NOW)
    job.delete("r3", NOW + timedelta(hours=1))
    job.restore_to(1, HOURLY, "r4", NOW + timedelta(days=1), skip_missed=True)
    replayed = None
    for event in job.collect_events():
        replayed = event.mutate(replayed)
    assert isinstance(replayed, Job)
    assert (replayed.version, replayed.revision, replayed.status, replayed.spec,
            replayed.next_fire_at) == (job.version, job.revision, "active", HOURLY,
                                       job.next_fire_at)
