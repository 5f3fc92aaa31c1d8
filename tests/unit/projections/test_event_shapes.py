"""A run logged the old way (RunScheduled v1 + AttemptDispatched, AttemptSucceeded +
RunSucceeded) and the same run logged the new way (RunScheduled carrying its dispatch,
AttemptSucceeded ending the run) mean the same thing to every reader (invariant 8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from cronlog.domain.job import Job
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import event_to_record, record_to_event
from cronlog.projections.history import HistoryProjector
from cronlog.projections.state import JobRow, RunRow, apply_run_event
from tests.support.history_rows import Store
from tests.support.state_writer import NoWrites

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
SPEC = JobSpec(name="n", tenant="t", queue="q", handler="echo", cron="* * * * *",
               timeout=timedelta(seconds=30))


def new_log() -> list[tuple[str, dict[str, Any]]]:
    job = Job.create(uuid4(), SPEC, "r1", T0)
    run = job.fire(T0 + timedelta(minutes=1))
    run.start(1, "w1", T0 + timedelta(minutes=1, seconds=1), T0 + timedelta(minutes=1, seconds=1))
    run.succeed(1, "w1", T0 + timedelta(minutes=1, seconds=2), b"ok", False,
                T0 + timedelta(minutes=1, seconds=2))
    return [event_to_record(e) for e in run.collect_events()]


def old_log(new: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """The same run as the code before this change logged it."""
    (_, scheduled), (_, started), (_, succeeded) = new
    v1 = {k: v for k, v in scheduled.items() if k not in ("attempt", "timeout_ms")}
    common = {"run_id": scheduled["run_id"], "job_id": scheduled["job_id"]}
    return [
        ("RunScheduled", {**v1, "attempt": 0, "timeout_ms": 0}),  # v1 read with v2's defaults
        ("AttemptDispatched", {**common, "version": 2, "at": scheduled["at"], "attempt": 1,
                               "not_before": scheduled["not_before"],
                               "timeout_ms": scheduled["timeout_ms"]}),
        ("AttemptStarted", {**started, "version": 3}),
        ("AttemptSucceeded", {**succeeded, "version": 4}),
        ("RunSucceeded", {**common, "version": 5, "at": succeeded["at"]}),
    ]


def test_the_new_log_has_one_event_fewer_at_each_end() -> None:
    assert [n for n, _ in new_log()] == ["RunScheduled", "AttemptStarted", "AttemptSucceeded"]


def replayed(log: Sequence[tuple[str, Mapping[str, Any]]], upto: int) -> Run:
    run: Run | None = None
    for name, record in log[:upto]:
        run = record_to_event(name, record).mutate(run)
    assert run is not None
    return run


def test_both_logs_replay_to_the_same_run() -> None:
    new = new_log()
    old = old_log(new)
    for new_upto, old_upto in ((1, 2), (2, 3), (3, 5)):
        a, b = replayed(new, new_upto), replayed(old, old_upto)
        assert (a.status, a.attempt, a.attempt_status, a.not_before) == \
            (b.status, b.attempt, b.attempt_status, b.not_before)
    assert replayed(old, 4).status == "succeeded"  # AttemptSucceeded alone ends it now


class Writer(NoWrites):
    def __init__(self) -> None:
        self.runs: dict[UUID, RunRow] = {}

    def insert_job(self, row: JobRow) -> None:
        raise AssertionError("no job events here")

    def update_job(self, job_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        raise AssertionError("no job events here")

    def insert_run(self, row: RunRow) -> None:
        self.runs[row.run_id] = row

    def update_run(self, run_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        self.runs[run_id] = replace(self.runs[run_id], version=version, **changes)

    def record_request(self, request_id: str, partition: int, job_id: UUID,
                       job_version: int, command: str | None = None,
                       digest: str | None = None) -> None:
        raise AssertionError("no requests here")


def state_after(log: Sequence[tuple[str, Mapping[str, Any]]], upto: int) -> tuple[Any, ...]:
    writer = Writer()
    for name, record in log[:upto]:
        apply_run_event(writer, 0, name, record, b"raw")
    (row,) = writer.runs.values()
    return row.status, row.attempt, row.attempt_status, row.not_before


def test_the_postgres_state_is_the_same_for_both_logs() -> None:
    new = new_log()
    old = old_log(new)
    for new_upto, old_upto in ((1, 2), (2, 3), (3, 5)):
        assert state_after(new, new_upto) == state_after(old, old_upto)
    assert state_after(new, 1)[:3] == ("scheduled", 1, "dispatched")
    assert state_after(new, 3)[:3] == ("succeeded", 1, "succeeded")


def history_of(log: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[Any, ...]]:
    store = Store()
    HistoryProjector(store).apply_batch(list(log))
    return [(r.attempt, r.run_status, r.attempt_status, r.not_before_us, r.dispatched_at_us,
             r.started_at_us, r.finished_at_us, r.start_lag_us, r.worker, r.output)
            for _, r in sorted(store.rows.items())]


def test_the_run_history_is_the_same_for_both_logs() -> None:
    new = new_log()
    rows = history_of(new)
    assert rows == history_of(old_log(new))
    assert [r[:3] for r in rows] == [(1, "succeeded", "succeeded")]
    assert rows[0][7] == 1_000_000  # started 1 s after its fire time
