"""What-if over real histories made by the domain, against hand-computed expectations: a
daily Berlin job moved across the spring DST change through a pause, and an hourly one made
every quarter hour through an outage."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from uuid import uuid4

from cronlog.domain.exclusions import NO_EXCLUSIONS
from cronlog.domain.job import Job
from cronlog.domain.policies import MisfirePolicy, OverlapPolicy
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import record_to_event
from cronlog.verification.findings import JobVerdict
from cronlog.verification.fire_chain import walk_fire_chain
from cronlog.verification.what_if import (
    WhatIf,
    current_fire_times,
    history_facts,
    replay,
)
from cronlog.verification.window import Window
from tests.support.verify_log import EventLog

CATCH_UP = timedelta(minutes=10)


def utc(day: int, hour: int, minute: int = 0, month: int = 3) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def what_if(log: EventLog, job: Job, spec: JobSpec, window: Window, now: datetime) -> WhatIf:
    events = log.of_job(job.id)
    chain = walk_fire_chain(events, record_to_event, window, JobVerdict(str(job.id), "t"))
    facts = history_facts(events, log.runs_of(job.id), now)
    return replay(facts, current_fire_times(chain, window), spec, window, CATCH_UP,
                  lambda s: s.schedule(NO_EXCLUSIONS))


def fire(log: EventLog, job: Job, now: datetime) -> None:
    """Fires what is due by `now`, at `now` (late if the job was held)."""
    runs = job.fire_due(now, now, CATCH_UP)
    log.take(job, *runs)


def berlin_daily() -> tuple[EventLog, Job, Window]:
    """`0 3 * * *` in Berlin from 27 March 2026, fired at each fire time, but paused on the
    30th from 00:00Z to 02:00Z (its 01:00Z fire time run late on the resume)."""
    spec = JobSpec(name="nightly", tenant="t", queue="default", handler="echo",
                   cron="0 3 * * *", time_zone="Europe/Berlin")
    log = EventLog()
    job = Job.create(uuid4(), spec, "create", utc(27, 0))
    log.take(job)
    for day in (27, 28):
        fire(log, job, utc(day, 2))  # 03:00 CET
    fire(log, job, utc(29, 1))  # 03:00 CEST, the first day of summer time
    job.pause("pause", utc(30, 0))
    job.resume("resume", utc(30, 2))
    log.take(job)
    fire(log, job, utc(30, 2))  # the 30th's 01:00Z, an hour late: RUN_LATEST runs it
    fire(log, job, utc(31, 1))
    return log, job, Window(utc(27, 0), utc(1, 0, month=4))


def test_a_daily_job_moved_across_the_dst_change_through_a_pause() -> None:
    log, job, window = berlin_daily()
    # 02:30 Berlin: CET +01:00 until the 29th, when 02:30 does not exist and the job fires
    # at 03:00 CEST (01:00Z, as it does today); CEST +02:00 after. Its fire times in the pause
    # (00:00Z to 02:00Z on the 30th) are due again on the resume, 90 minutes late: SKIP.
    proposed = JobSpec(name="nightly", tenant="t", queue="default", handler="echo",
                       cron="30 2 * * *", time_zone="Europe/Berlin",
                       misfire_policy=MisfirePolicy.SKIP)
    result = what_if(log, job, proposed, window, utc(1, 0, month=4))
    assert result.current == [utc(27, 2), utc(28, 2), utc(29, 1), utc(30, 1), utc(31, 1)]
    assert result.proposed == [utc(27, 1, 30), utc(28, 1, 30), utc(29, 1), utc(30, 0, 30),
                               utc(31, 0, 30)]
    assert result.added == [utc(27, 1, 30), utc(28, 1, 30), utc(30, 0, 30), utc(31, 0, 30)]
    assert result.removed == [utc(27, 2), utc(28, 2), utc(30, 1), utc(31, 1)]
    assert [t for t, _ in result.missed] == [utc(30, 0, 30)]
    assert "1:30:00 late, beyond the catch-up window (misfire policy skip)" in \
        result.missed[0][1]
    assert result.late == []
    assert result.dst_days == [(date(2026, 3, 29), "UTC offset +01:00 to +02:00",
                                [utc(29, 1)])]
    # Under RUN_ALL the paused fire time runs on the resume instead.
    run_all = what_if(log, job, JobSpec(**{**vars(proposed),
                                          "misfire_policy": MisfirePolicy.RUN_ALL}),
                      window, utc(1, 0, month=4))
    assert run_all.missed == [] and run_all.late == [(utc(30, 0, 30), timedelta(hours=1,
                                                                               minutes=30))]


def test_an_hourly_job_made_every_quarter_hour_through_an_outage() -> None:
    spec = JobSpec(name="hourly", tenant="t", queue="default", handler="echo",
                   cron="0 * * * *")
    log = EventLog()
    job = Job.create(uuid4(), spec, "create", utc(6, 0))
    log.take(job)
    for hour in (1, 2):
        fire(log, job, utc(6, hour))
    fire(log, job, utc(6, 3, 45))  # the scheduler down from 03:00 to 03:45
    fire(log, job, utc(6, 4))
    window = Window(utc(6, 0), utc(6, 4, 1))
    proposed = JobSpec(name="hourly", tenant="t", queue="default", handler="echo",
                       cron="*/15 * * * *")  # RUN_LATEST, the default
    result = what_if(log, job, proposed, window, utc(6, 5))
    assert result.current == [utc(6, 1), utc(6, 2), utc(6, 3), utc(6, 4)]
    assert len(result.proposed) == 16 and result.removed == []
    assert len(result.added) == 12
    # 03:00, 03:15, 03:30 fall in the outage: 45, 30 and 15 minutes late at 03:45, all
    # beyond the catch-up window; RUN_LATEST runs the latest of them and records the others.
    assert [t for t, _ in result.missed] == [utc(6, 3), utc(6, 3, 15)]
    assert result.late == [(utc(6, 3, 30), timedelta(minutes=15))]
    assert result.top_of_hour_load() == {}  # the tops of the hours fire as they do today
    assert result.dst_days == []


def test_overlaps_follow_the_real_runs_duration_and_the_overlap_policy() -> None:
    spec = JobSpec(name="slow", tenant="t", queue="default", handler="echo", cron="0 * * * *")
    log = EventLog()
    job = Job.create(uuid4(), spec, "create", utc(6, 0))
    log.take(job)
    runs = job.fire_due(utc(6, 1), utc(6, 1), CATCH_UP)
    for run in runs:
        run.start(run.attempt, "w1", utc(6, 1), utc(6, 1))
        run.succeed(run.attempt, "w1", utc(6, 1, 25), b"", False, utc(6, 1, 25))
    log.take(job, *runs)
    window = Window(utc(6, 0), utc(6, 2))
    every_20 = JobSpec(name="slow", tenant="t", queue="default", handler="echo",
                       cron="*/20 * * * *")
    result = what_if(log, job, every_20, window, utc(6, 3))
    # Each run takes 25 minutes: every fire time but the first meets the one before.
    assert result.proposed == [utc(6, 0, 20), utc(6, 0, 40), utc(6, 1), utc(6, 1, 20),
                               utc(6, 1, 40)]
    assert [t for t, _ in result.overlapping] == result.proposed[1:]
    assert {why for _, why in result.overlapping} == {"runs beside the run before"}
    assert result.top_of_hour_load() == {}
    skip = what_if(log, job, JobSpec(**{**vars(every_20), "overlap_policy": OverlapPolicy.SKIP}),
                   window, utc(6, 3))
    # Skipped ones take no time: 00:40 is skipped, 01:00 starts, 01:20 is skipped...
    assert [t for t, _ in skip.overlapping] == [utc(6, 0, 40), utc(6, 1, 20)]


def test_a_success_that_carries_its_start_gives_the_runs_duration() -> None:
    at = utc(2, 9)
    created = [("JobCreated", {"at": at - timedelta(days=1)})]
    apart = [("AttemptStarted", {"run_id": "r1", "attempt": 1, "started_at": at}),
             ("AttemptSucceeded", {"run_id": "r1", "attempt": 1, "started_at": None,
                                   "finished_at": at + timedelta(minutes=3)}),
             ("AttemptSucceeded", {"run_id": "r2", "attempt": 1, "started_at": at,
                                   "finished_at": at + timedelta(minutes=5)})]
    facts = history_facts(created, apart, at + timedelta(hours=1))
    assert sorted(facts.durations) == [timedelta(minutes=3), timedelta(minutes=5)]
