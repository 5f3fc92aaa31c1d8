"""VerifyHistory and WhatIf at the api (commands/api/history_proofs.py): the proof of
`cronlog verify` and `cronlog what-if` over a log made by the real domain, within bounds a
tenant cannot move: window, jobs named, records read, one proof at a time."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest

from cronlog.commands.api.history_proofs import (
    MAX_PROOF_JOBS,
    HistoryProofs,
    LogTooLarge,
    ProofBusy,
)
from cronlog.domain.errors import InvalidSpec, JobNotFound
from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import record_to_event
from cronlog.verification.window import Window
from tests.support.verify_log import EventLog

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
HOURLY = JobSpec(name="hourly", tenant="acme", queue="default", handler="echo",
                 cron="0 * * * *")


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


class Reader:
    """The log of an EventLog, as the Kafka reader gives it; records what it was asked."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.asked: list[tuple[Any, ...]] = []
        self.hold: threading.Event | None = None

    def tenant_log(self, window: Window, tenant: str, job_ids: Sequence[str],
                   most_records: int) -> tuple[dict[str, Any], dict[str, Any]]:
        self.asked.append((window, tenant, tuple(job_ids), most_records))
        if self.hold is not None:
            self.hold.wait(5)
        return self.log.job_events, self.log.run_events

    def job_log(self, job_id: UUID, window: Window, most_records: int) -> tuple[Any, Any]:
        self.asked.append((job_id, window, most_records))
        return (list(self.log.job_events.get(str(job_id), [])),
                list(self.log.run_events.get(str(job_id), [])))


def proofs_over(log: EventLog, now: datetime = T0 + 10 * HOUR) -> tuple[HistoryProofs, Reader]:
    reader = Reader(log)
    return HistoryProofs(reader, Clock(now), timedelta(seconds=15), record_to_event), reader


def a_log() -> tuple[EventLog, Job]:
    log = EventLog()
    job = Job.create(uuid4(), HOURLY, "create", T0)
    log.take(job)
    log.fire_and_run(job, T0 + 5 * HOUR)
    return log, job


def test_a_tenant_s_history_is_proved_as_verify_proves_it() -> None:
    log, job = a_log()
    proofs, reader = proofs_over(log)
    result = proofs.verify("acme", [], T0, T0 + 6 * HOUR, timedelta(minutes=10))
    assert result.holds and result.tally.fire_times == 5
    (window, tenant, named, most), = reader.asked
    assert (window, tenant, named, most) == (Window(T0, T0 + 6 * HOUR), "acme", (),
                                             proofs.most_records)
    # Another tenant's proof covers none of these jobs.
    assert proofs.verify("other", [], T0, T0 + 6 * HOUR, None).tally.jobs == 0
    # A doubled fire time is a violation, named.
    runs = log.runs_of(job.id)
    runs.append(next(e for e in runs if e[0] == "RunScheduled"))
    doubled = proofs.verify("acme", [str(job.id)], T0, T0 + 6 * HOUR, None)
    assert [str(v.check) for v in doubled.violations] == ["fire_time_doubled"]


@pytest.mark.parametrize(("since", "until", "job_ids", "settle", "field"), [
    (T0 - timedelta(days=32), T0, [], None, "since"),
    (T0 + HOUR, T0, [], None, "until"),
    (T0, T0 + 11 * HOUR, [], None, "until"),  # in the future
    (T0, None, ["not-a-uuid"], None, "job_ids"),
    (T0, None, [str(uuid4()) for _ in range(MAX_PROOF_JOBS + 1)], None, "job_ids"),
    (T0, None, [], timedelta(0), "settle"),
])
def test_a_request_out_of_bounds_is_refused_naming_the_field_and_reads_nothing(
        since: datetime, until: datetime | None, job_ids: list[str],
        settle: timedelta | None, field: str) -> None:
    proofs, reader = proofs_over(EventLog())
    with pytest.raises(InvalidSpec) as refused:
        proofs.verify("acme", job_ids, since, until, settle)
    assert refused.value.field == field
    assert reader.asked == []


def test_a_log_too_large_is_refused_and_one_proof_runs_at_a_time() -> None:
    proofs, reader = proofs_over(EventLog())

    def too_large(window: Window, tenant: str, job_ids: Sequence[str],
                  most_records: int) -> tuple[dict[str, Any], dict[str, Any]]:
        raise LogTooLarge(proofs.most_records)

    # Replaced on this one reader only: the next proofs_over gets one that answers.
    reader.tenant_log = too_large  # type: ignore[method-assign]
    with pytest.raises(LogTooLarge) as refused:
        proofs.verify("acme", [], T0, None, None)
    assert refused.value.status == "RESOURCE_EXHAUSTED"
    assert "cronlog verify" in str(refused.value)

    proofs, reader = proofs_over(EventLog())
    reader.hold = threading.Event()
    first = threading.Thread(target=proofs.verify, args=("acme", [], T0, None, None))
    first.start()
    try:
        while not reader.asked:
            threading.Event().wait(0.01)
        with pytest.raises(ProofBusy):
            proofs.verify("other", [], T0, None, None)
    finally:
        reader.hold.set()
        first.join(5)
    assert proofs.verify("other", [], T0, None, None).holds, "free again once it ended"


def test_what_if_replays_the_job_s_history_under_the_spec() -> None:
    log, job = a_log()
    proofs, _ = proofs_over(log)
    half_hourly = replace(HOURLY, cron="*/30 * * * *")
    result = proofs.what_if(job.id, half_hourly, T0, T0 + 6 * HOUR)
    assert len(result.current) == 5 and len(result.proposed) == 11
    # 00:30 to 05:30: the half hours; the hours it fired stay.
    assert result.added == [T0 + k * HOUR + timedelta(minutes=30) for k in range(6)]
    assert result.removed == []
    with pytest.raises(JobNotFound):
        proofs.what_if(uuid4(), half_hourly, T0, None)
    with pytest.raises(InvalidSpec) as moved:
        proofs.what_if(job.id, replace(half_hourly, tenant="other"), T0, None)
    assert moved.value.field == "spec.tenant"
