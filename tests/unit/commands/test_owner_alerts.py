"""The alerts an owner writes (commands/owner/alerts.py): the facts a job's rule wants, with
the job's name and rule in the record, under ids that a cycle decided again repeats, and
nothing for a job without a rule; every record as the Alert schema's newest version takes it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from cronlog.commands.owner import alerts
from cronlog.commands.owner.owner_messages import dead_letter
from cronlog.commands.owner.ports import Topics
from cronlog.domain.catalogue import JobEvent, RunEvent
from cronlog.domain.job import Job
from cronlog.domain.notify_rule import AlertFact, NotifyRule, notify_rule
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec

TOPICS = Topics("job-events", "run-events", "replies", lambda q: f"dispatch.{q}")
T0 = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def _job(rule: NotifyRule | None) -> Job:
    spec = JobSpec(name="nightly", tenant="acme", queue="default", handler="echo",
                   cron="0 2 * * *", notify=rule)
    return Job.create(job_id=UUID(int=7), spec=spec, request_id="r", at=T0 - S)


def _run(job: Job) -> Run:
    return Run.schedule(job, T0, "schedule", T0)


def _raised(job: Job, name: str, **record: Any) -> Mapping[str, Any] | None:
    out = alerts.run_event_alert(TOPICS, _run(job), name, {"at": T0 + 9 * S, **record}, job)
    if out is None:
        return None
    assert out.topic == TOPICS.alerts and out.key == str(job.id)
    AvroCodec().encode(out.name, out.record)  # the newest Alert version takes it
    return out.record


def test_a_job_without_a_rule_raises_nothing_of_its_own() -> None:
    job = _job(None)
    for name, record in [(RunEvent.ATTEMPT_FAILED, {"attempt": 1, "error": "boom"}),
                         (RunEvent.ATTEMPT_SUCCEEDED, {}),
                         (RunEvent.ATTEMPT_STARTED, {"attempt": 1, "started_at": T0 + 600 * S})]:
        assert _raised(job, name, **record) is None


def test_only_the_kinds_the_rule_wants_with_the_jobs_name_and_rule() -> None:
    job = _job(notify_rule(["ops", "mail"], ["failed", "recovered"]))
    failed = _raised(job, RunEvent.ATTEMPT_FAILED, attempt=2, error="exit status 1")
    assert failed is not None
    assert failed["kind"] == AlertFact.ATTEMPT_FAILED.value
    assert failed["job_name"] == "nightly" and failed["attempt"] == 2
    assert failed["notify"] == {"channels": ["ops", "mail"], "on": ["failed", "recovered"]}
    assert "exit status 1" in failed["message"]
    succeeded = _raised(job, RunEvent.ATTEMPT_SUCCEEDED)
    assert succeeded is not None and succeeded["kind"] == "run_succeeded"
    assert _raised(job, RunEvent.ATTEMPT_TIMED_OUT, attempt=1) is None
    # Decided again (a cycle whose commit failed): the same alert, the same id.
    again = _raised(job, RunEvent.ATTEMPT_FAILED, attempt=2, error="x")
    assert again is not None and again["alert_id"] == failed["alert_id"]
    next_attempt = _raised(job, RunEvent.ATTEMPT_FAILED, attempt=3, error="x")
    assert next_attempt is not None and next_attempt["alert_id"] != failed["alert_id"]


@pytest.mark.parametrize(("attempt", "late", "raised"), [
    (1, 121, True), (1, 120, False), (1, 5, False), (2, 600, False)])
def test_a_first_attempt_later_than_late_after_is_a_late_start(attempt: int, late: int,
                                                               raised: bool) -> None:
    job = _job(notify_rule(["ops"], ["started_late"], timedelta(minutes=2)))
    record = _raised(job, RunEvent.ATTEMPT_STARTED, attempt=attempt,
                     started_at=T0 + late * S)
    assert (record is not None) is raised
    if record is not None:
        assert record["kind"] == "run_started_late" and "121.0s after its time" in \
            record["message"]


def test_missed_fire_times_as_a_range_for_a_job_that_wants_them() -> None:
    record = {"at": T0, "first": T0, "last": T0 + 60 * S, "count": 2, "reason": "paused"}
    assert alerts.job_event_alert(TOPICS, _job(notify_rule(["ops"], ["failed"])),
                                  JobEvent.FIRE_TIMES_MISSED, record) is None
    job = _job(notify_rule(["ops"], ["missed"]))
    out = alerts.job_event_alert(TOPICS, job, JobEvent.FIRE_TIMES_MISSED, record)
    assert out is not None and out.record["kind"] == "fire_times_missed"
    assert out.record["run_id"] is None and "2 fire times" in out.record["message"]
    AvroCodec().encode(out.name, out.record)


def test_a_dead_letter_is_always_raised_and_carries_the_rule_if_any() -> None:
    for rule in (None, notify_rule(["ops"], ["failed"])):
        job = _job(rule)
        _, raised = dead_letter(TOPICS, _run(job), {"reason": "boom", "at": T0}, job)
        assert raised.record["kind"] == "run_dead_lettered"
        assert raised.record["notify"] == (None if rule is None else
                                           {"channels": ["ops"], "on": ["failed"]})
        AvroCodec().encode(raised.name, raised.record)
