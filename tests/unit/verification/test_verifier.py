"""verify over logs made by the real domain: a clean log holds, across pauses, misses and a
DST change; each corruption is found, naming the job, the fire time and the events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.domain.dependency import ChainSlot, Dependency, dependent_run_id
from cronlog.domain.fan_in import DependentRun
from cronlog.domain.job import Job
from cronlog.domain.policies import MisfirePolicy, RetryPolicy
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from cronlog.verification import verifier
from cronlog.verification.findings import Check
from cronlog.verification.verifier import TooManyJobs
from cronlog.verification.window import InvalidWindow, Window
from tests.support.verify_log import EventLog, named, with_fields

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def hourly(tenant: str = "t", **fields: object) -> JobSpec:
    return JobSpec(name="hourly", tenant=tenant, queue="default", handler="echo",
                   cron="0 * * * *", **fields)  # type: ignore[arg-type]


def made(spec: JobSpec, at: datetime = T0) -> tuple[EventLog, Job]:
    log = EventLog()
    job = Job.create(uuid4(), spec, "create", at)
    log.take(job)
    return log, job


def checks(result: verifier.Verification) -> list[tuple[Check, datetime | None]]:
    return [(v.check, v.fire_time) for v in result.violations]


def test_a_clean_log_holds_and_counts_what_it_proved() -> None:
    log, job = made(hourly())
    log.fire_and_run(job, T0 + 5 * HOUR)
    result = log.verify(T0, T0 + 6 * HOUR, settled_before=T0 + 7 * HOUR)
    assert result.holds, result.violations
    assert (result.tally.jobs, result.tally.fire_times, result.tally.runs,
            result.tally.attempts) == (1, 5, 5, 5)


def test_pauses_misses_and_a_resume_hold() -> None:
    log, job = made(hourly(misfire_policy=MisfirePolicy.SKIP))
    log.fire_and_run(job, T0 + 2 * HOUR)
    job.pause("pause", T0 + 2 * HOUR + timedelta(minutes=5))
    back = T0 + 6 * HOUR + timedelta(minutes=30)
    job.resume("resume", back)
    # Back after its catch-up window: 03:00..06:00 are recorded missed, one range.
    assert job.fire_due(back, back, timedelta(minutes=10)) == []
    log.take(job)
    log.fire_and_run(job, T0 + 8 * HOUR)
    result = log.verify(T0, T0 + 9 * HOUR, settled_before=T0 + 10 * HOUR)
    assert result.holds, result.violations
    assert result.tally.missed_fire_times == 4
    assert result.tally.fire_times == 4  # 01:00, 02:00, 07:00, 08:00


def test_a_daily_job_across_the_spring_dst_change_holds() -> None:
    # 02:30 Berlin does not exist on 29 March 2026: that day it fires at 03:00 (docs/cron.md).
    spec = JobSpec(name="nightly", tenant="t", queue="default", handler="echo",
                   cron="30 2 * * *", time_zone="Europe/Berlin")
    log, job = made(spec, datetime(2026, 3, 27, tzinfo=UTC))
    runs = log.fire_and_run(job, datetime(2026, 3, 31, 12, tzinfo=UTC))
    assert [r.scheduled_at.strftime("%d %H:%M") for r in runs] == [
        "27 01:30", "28 01:30", "29 01:00", "30 00:30", "31 00:30"]
    result = log.verify(datetime(2026, 3, 27, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC),
                        settled_before=datetime(2026, 4, 2, tzinfo=UTC))
    assert result.holds, result.violations
    # The same log where the owner had fired the non-existent 02:30 local (00:30 UTC).
    events = log.of_job(job.id)
    index, fired = named(events, "JobFireAdvanced")[1]
    wrong = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # 02:30 as if it were summer time
    events[index] = ("JobFireAdvanced", with_fields(fired, next_fire_at=wrong))
    found = log.verify(datetime(2026, 3, 27, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC),
                       settled_before=datetime(2026, 4, 2, tzinfo=UTC))
    assert (Check.FIRE_TIME_OFF_SCHEDULE, fired["next_fire_at"]) in checks(found)


def test_a_doubled_fire_time_is_found_with_its_events() -> None:
    log, job = made(hourly())
    log.fire_and_run(job, T0 + 3 * HOUR)
    runs = log.runs_of(job.id)
    _, scheduled = named(runs, "RunScheduled")[1]
    runs.append(("RunScheduled", dict(scheduled)))  # a second owner wrote it again
    result = log.verify(T0, T0 + 4 * HOUR, settled_before=T0 + 5 * HOUR)
    doubled = [v for v in result.violations if v.check == Check.FIRE_TIME_DOUBLED]
    assert len(doubled) == 1
    assert doubled[0].job_id == str(job.id) and doubled[0].fire_time == T0 + 2 * HOUR
    assert doubled[0].run_id == str(scheduled["run_id"])
    assert [e.event for e in doubled[0].evidence] == ["JobFireAdvanced", "RunScheduled",
                                                      "RunScheduled"]


def test_another_run_for_a_fire_time_is_doubled_and_of_no_fire() -> None:
    log, job = made(hourly())
    log.fire_and_run(job, T0 + 2 * HOUR)
    _, scheduled = named(log.runs_of(job.id), "RunScheduled")[0]
    log.runs_of(job.id).append(("RunScheduled", with_fields(scheduled, run_id=uuid4())))
    result = log.verify(T0, T0 + 3 * HOUR, settled_before=T0 + 4 * HOUR)
    # The forged run's attempt never ended either.
    assert sorted(checks(result)) == [(Check.ATTEMPT_WITHOUT_END, T0 + HOUR),
                                      (Check.FIRE_TIME_DOUBLED, T0 + HOUR),
                                      (Check.RUN_WITHOUT_FIRE, T0 + HOUR)]


@pytest.mark.parametrize("renumbered", [True, False])
def test_a_missing_fire_time_is_found(renumbered: bool) -> None:
    log, job = made(hourly())
    log.fire_and_run(job, T0 + 4 * HOUR)
    # The fire of 02:00 and its run gone: 03:00 fired while due at 02:00. Renumbered, as an
    # owner that passed over it would have written; or lost from the log, a gap.
    events = log.of_job(job.id)
    index, fired = named(events, "JobFireAdvanced")[1]
    del events[index]
    if renumbered:
        events[index:] = [(n, with_fields(r, version=int(r["version"]) - 1))
                          for n, r in events[index:]]
    log.run_events[str(job.id)] = [(n, r) for n, r in log.runs_of(job.id)
                                   if str(r["run_id"]) != str(fired["run_id"])]
    result = log.verify(T0, T0 + 5 * HOUR, settled_before=T0 + 6 * HOUR)
    gap = [] if renumbered else [(Check.JOB_EVENTS_MISSING, None)]
    assert checks(result) == [*gap, (Check.FIRE_TIME_SKIPPED, T0 + 2 * HOUR)]
    assert "neither run nor recorded missed" in result.violations[-1].detail


def test_two_writers_of_one_job_are_found() -> None:
    log, job = made(hourly())
    log.fire_and_run(job, T0 + 2 * HOUR)
    events = log.of_job(job.id)
    index, fired = named(events, "JobFireAdvanced")[0]
    events.insert(index + 1, ("JobFireAdvanced", dict(fired)))
    result = log.verify(T0, T0 + 3 * HOUR, settled_before=T0 + 4 * HOUR)
    assert checks(result) == [(Check.JOB_EVENT_REPEATED, None)]


def test_a_stalled_job_is_found_once_its_fire_time_settled() -> None:
    log, job = made(hourly())
    log.fire_and_run(job, T0 + 2 * HOUR)
    assert log.verify(T0, T0 + 4 * HOUR, settled_before=T0 + 2 * HOUR).holds
    result = log.verify(T0, T0 + 4 * HOUR, settled_before=T0 + 4 * HOUR)
    assert checks(result) == [(Check.FIRE_TIME_NOT_FIRED, T0 + 3 * HOUR)]


def test_a_fire_after_the_delete_is_found() -> None:
    log, job = made(hourly())
    log.fire_and_run(job, T0 + 2 * HOUR)
    job.delete("delete", T0 + 2 * HOUR + timedelta(minutes=1))
    log.take(job)
    events = log.of_job(job.id)
    _, last_fire = named(events, "JobFireAdvanced")[-1]
    version = int(events[-1][1]["version"]) + 1
    run_id = uuid4()
    events.append(("JobFireAdvanced", with_fields(
        last_fire, version=version, fired_at=T0 + 3 * HOUR, run_id=run_id,
        next_fire_at=T0 + 4 * HOUR, at=T0 + 3 * HOUR)))
    result = log.verify(T0, T0 + 5 * HOUR, settled_before=T0 + 6 * HOUR)
    assert (Check.FIRED_WHILE_INACTIVE, T0 + 3 * HOUR) in checks(result)
    inactive = next(v for v in result.violations if v.check == Check.FIRED_WHILE_INACTIVE)
    assert "while the job was deleted" in inactive.detail
    assert inactive.evidence[0].version == version


def test_a_retry_past_the_policy_and_attempts_ended_twice_or_never() -> None:
    policy = RetryPolicy(max_attempts=2, initial_backoff=timedelta(seconds=1))
    log, job = made(hourly(retry_policy=policy))
    [run] = job.fire_due(T0 + HOUR, T0 + HOUR, timedelta(minutes=10))
    log.take(job)
    log.fail_every_attempt(run, policy)
    assert log.verify(T0, T0 + 2 * HOUR, settled_before=T0 + 3 * HOUR).holds
    runs = log.runs_of(job.id)
    _, dispatched = named(runs, "AttemptDispatched")[-1]
    version = max(int(r["version"]) for _, r in runs)
    runs.append(("AttemptDispatched", with_fields(dispatched, attempt=3, version=version + 1)))
    _, failed = named(runs, "AttemptFailed")[0]
    runs.append(("AttemptFailed", with_fields(failed, version=version + 2)))
    result = log.verify(T0, T0 + 2 * HOUR, settled_before=T0 + 3 * HOUR)
    assert sorted(v.check for v in result.violations) == sorted(
        [Check.RETRY_BEYOND_POLICY, Check.ATTEMPT_ENDED_TWICE, Check.ATTEMPT_WITHOUT_END])
    beyond = next(v for v in result.violations if v.check == Check.RETRY_BEYOND_POLICY)
    assert beyond.detail == "attempt 3 dispatched; the run allows 2"
    assert beyond.fire_time == T0 + HOUR and beyond.run_id == str(run.id)


def test_an_attempt_still_within_its_timeout_is_not_a_violation() -> None:
    log, job = made(hourly())
    [run] = job.fire_due(T0 + HOUR, T0 + HOUR, timedelta(minutes=10))
    log.take(job, run)
    assert log.verify(T0, T0 + 2 * HOUR, settled_before=T0 + HOUR + timedelta(minutes=4)).holds
    late = log.verify(T0, T0 + 2 * HOUR, settled_before=T0 + HOUR + timedelta(minutes=6))
    assert checks(late) == [(Check.ATTEMPT_WITHOUT_END, T0 + HOUR)]


def test_a_run_ended_twice_but_a_redrive_reopens_it() -> None:
    policy = RetryPolicy(max_attempts=1)
    log, job = made(hourly(retry_policy=policy))
    [run] = job.fire_due(T0 + HOUR, T0 + HOUR, timedelta(minutes=10))
    log.take(job)
    log.fail_every_attempt(run, policy)
    at = T0 + HOUR + timedelta(minutes=10)
    run.redrive("redrive", "alice", timedelta(minutes=1), at)
    run.start(run.attempt, "w1", at, at)
    run.succeed(run.attempt, "w1", at, b"", False, at)
    log.take_run(run)
    assert log.verify(T0, T0 + 2 * HOUR, settled_before=T0 + 3 * HOUR).holds
    runs = log.runs_of(job.id)
    runs[:] = [(n, r) for n, r in runs if n != "RunRedriven"]
    result = log.verify(T0, T0 + 2 * HOUR, settled_before=T0 + 3 * HOUR)
    assert Check.RUN_ENDED_TWICE in [v.check for v in result.violations]


def test_only_the_tenant_and_the_window_asked_for_are_verified() -> None:
    log, job = made(hourly("a"))
    log.fire_and_run(job, T0 + 4 * HOUR)
    other = Job.create(uuid4(), hourly("b"), "create-b", T0)
    log.take(other)  # never fired: stalled
    assert log.verify(T0, T0 + 5 * HOUR, T0 + 6 * HOUR, tenant="a").holds
    assert not log.verify(T0, T0 + 5 * HOUR, T0 + 6 * HOUR).holds
    assert log.verify(T0 + 2 * HOUR, T0 + 3 * HOUR, T0 + 6 * HOUR, "a").tally.fire_times == 1


def test_the_window_and_the_jobs_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidWindow, match=r"--until: .* is not after --since"):
        Window(T0, T0)
    with pytest.raises(InvalidWindow, match="--since: a window of at most 92 days"):
        Window(T0, T0 + timedelta(days=93))
    with pytest.raises(InvalidWindow, match="--since: an instant with its UTC offset"):
        Window(T0.replace(tzinfo=None), T0 + HOUR)
    log = EventLog()
    for _ in range(3):
        log.take(Job.create(uuid4(), hourly(), "c", T0))
    monkeypatch.setattr(verifier, "MAX_JOBS", 2)
    with pytest.raises(TooManyJobs, match="3 jobs could fire in the window, more than the 2"):
        log.verify(T0, T0 + HOUR, T0 + HOUR)


def test_a_run_created_before_the_log_read_is_not_judged() -> None:
    log, job = made(hourly())
    runs: list[Run] = log.fire_and_run(job, T0 + 3 * HOUR)
    first = str(runs[0].id)
    log.run_events[str(job.id)] = [(n, r) for n, r in log.runs_of(job.id)
                                   if str(r["run_id"]) != first]
    assert log.verify(T0 + 90 * timedelta(minutes=1), T0 + 4 * HOUR, T0 + 5 * HOUR).holds


def dependent_of(log: EventLog, upstream: Job, upstream_run: Run, ran_at: datetime) -> Run:
    """A job after `upstream`, and its run after `upstream_run`, succeeded."""
    spec = JobSpec(name="after", tenant="t", queue="default", handler="echo",
                   after=Dependency((upstream.id,)))
    dependent = Job.create(uuid4(), spec, "create-dependent", T0)
    run_ids = (upstream_run.id,)
    decision = DependentRun(ChainSlot(upstream_run.scheduled_at),
                            dependent_run_id(dependent.id, run_ids), run_ids, 1)
    [run] = dependent.run_after(decision, ran_at, [])
    run.start(run.attempt, "w1", ran_at, ran_at)
    run.succeed(run.attempt, "w1", ran_at, b"", False, ran_at)
    log.take(dependent, run)
    return run


def test_a_dependency_run_is_founded_on_its_upstream_end() -> None:
    log, upstream = made(hourly())
    [upstream_run] = log.fire_and_run(upstream, T0 + HOUR)
    run = dependent_of(log, upstream, upstream_run, T0 + HOUR + timedelta(minutes=1))
    result = log.verify(T0, T0 + 2 * HOUR, settled_before=T0 + 3 * HOUR)
    assert result.holds, result.violations
    assert result.tally.dependency_runs == 1
    # Made before its upstream run had ended:
    runs = log.runs_of(run.job_id)
    index, created = named(runs, "RunScheduled")[0]
    runs[index] = ("RunScheduled", with_fields(created, at=T0 + HOUR))
    early = log.verify(T0, T0 + 2 * HOUR, settled_before=T0 + 3 * HOUR)
    [unfounded] = early.violations
    assert unfounded.check == Check.DEPENDENT_RUN_UNFOUNDED
    assert f"follows upstream run {upstream_run.id}, which had not ended" in unfounded.detail
    # Naming another upstream run than its id was derived from:
    runs[index] = ("RunScheduled", with_fields(created, upstream_run_ids=[uuid4()]))
    [misnamed] = log.verify(T0, T0 + 2 * HOUR, settled_before=T0 + 3 * HOUR).violations
    assert misnamed.check == Check.DEPENDENT_RUN_UNFOUNDED and "would be" in misnamed.detail


@pytest.mark.parametrize("skip_missed", [True, False])
def test_a_job_deleted_then_restored_holds_and_its_restore_is_checked(
        skip_missed: bool) -> None:
    # Deleted before the window, restored in it: still verified (issue 38).
    log, job = made(hourly(misfire_policy=MisfirePolicy.SKIP))
    log.fire_and_run(job, T0 + 2 * HOUR)
    job.delete("delete", T0 + 2 * HOUR + timedelta(minutes=5))
    back = T0 + 6 * HOUR + timedelta(minutes=30)
    job.restore_to(1, hourly(misfire_policy=MisfirePolicy.SKIP), "restore", back,
                   skip_missed=skip_missed)
    # Not skipped: 03:00..06:00 are overdue and recorded missed by the SKIP policy.
    assert job.fire_due(back, back, timedelta(minutes=10)) == []
    log.take(job)
    log.fire_and_run(job, T0 + 8 * HOUR)
    window = (T0 + 3 * HOUR, T0 + 9 * HOUR)
    result = log.verify(*window, settled_before=T0 + 10 * HOUR)
    assert result.holds, result.violations
    assert result.tally.missed_fire_times == (0 if skip_missed else 4)
    assert result.tally.fire_times == 2  # 07:00, 08:00
    # A restore that set another next fire time than the schedule gives is named.
    events = log.of_job(job.id)
    index, restored = named(events, "JobRestored")[0]
    events[index] = ("JobRestored", with_fields(restored, next_fire_at=T0 + 5 * HOUR))
    found = log.verify(*window, settled_before=T0 + 10 * HOUR)
    assert (Check.FIRE_TIME_OFF_SCHEDULE, restored["next_fire_at"]) in checks(found)
