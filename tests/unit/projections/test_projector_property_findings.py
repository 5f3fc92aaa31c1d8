"""What the projector property (test_projector_property.py) found, one example each: the
history of a run shows only stored events, whatever batch or restart they came through."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.ports import InboundMessage
from cronlog.projections.history import HistoryProjector, UnstorableEvent
from cronlog.projections.job_history import JobChangedTenant, JobHistoryProjector
from tests.support.clickhouse_history import ClickHouseLikeHistory
from tests.support.history_loop import Feed, Rejected
from tests.support.history_property import history_loop

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN, JOB = str(uuid4()), str(uuid4())


def run_event(name: str, version: int, **fields: Any) -> tuple[str, dict[str, Any]]:
    base: dict[str, Any] = {"run_id": RUN, "job_id": JOB, "version": version, "at": T0}
    if name in ("RunScheduled", "RunMissed", "RunSkipped"):
        base.update(tenant="t", queue="q", handler="h", scheduled_at=T0, not_before=T0,
                    trigger="schedule", max_attempts=3, attempt=0, timeout_ms=1000,
                    reason="overlap")
    if name.startswith("Attempt"):
        base.update(attempt=1, not_before=T0, timeout_ms=1000, worker="w", started_at=T0,
                    finished_at=T0 + timedelta(seconds=1), output=b"out",
                    output_truncated=False, error="boom", reason="lost")
    base.update(fields)
    return name, base


def read(events: list[tuple[str, dict[str, Any]]]) -> list[InboundMessage]:
    topic = "run-events"
    return [InboundMessage(topic, 0, offset, name, record, b"")
            for offset, (name, record) in enumerate(events)]


def test_an_event_set_aside_leaves_no_row_of_its_run() -> None:
    """The run's row was inserted before its event's row was refused (a 1969 `at`)."""
    store, rejected = ClickHouseLikeHistory(), Rejected()
    event = run_event("RunSkipped", 1, at=datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC))
    history_loop(Feed([read([event])]), store, rejected).step()
    assert [m.offset for m, _ in rejected.aside] == [0]
    assert "UnstorableEvent: at" in rejected.aside[0][1]
    assert store.runs == [] and store.run_events == []


def test_an_event_that_fails_leaves_no_trace_in_the_runs_the_projector_remembers() -> None:
    store = ClickHouseLikeHistory()
    projector = HistoryProjector(store)
    projector.apply_batch([run_event("RunScheduled", 1)])
    with pytest.raises(UnstorableEvent):
        # Folded, then refused: before, the remembered run had moved to version 9.
        projector.apply_batch([run_event("AttemptDispatched", 9, attempt=-1)])
    written = len(store.runs)
    projector.apply_batch([run_event("AttemptDispatched", 2)])
    assert [(r.attempt, r.attempt_status, r.version) for r in store.runs[written:]] == [
        (1, "dispatched", 2)]


def test_a_retry_after_a_restart_does_not_inherit_the_attempt_before_it() -> None:
    store = ClickHouseLikeHistory()
    HistoryProjector(store).apply_batch([
        run_event("RunScheduled", 1), run_event("AttemptDispatched", 2),
        run_event("AttemptStarted", 3), run_event("AttemptFailed", 4)])
    restarted = HistoryProjector(store)  # knows the run only from its rows
    restarted.apply_batch([run_event("AttemptDispatched", 5, attempt=2)])
    second = store.latest_attempt_rows([RUN])[RUN][-1]
    assert (second.attempt, second.attempt_status) == (2, "dispatched")
    assert (second.started_at_us, second.finished_at_us, second.worker, second.output,
            second.error) == (0, 0, "", "", "")


def test_a_redelivered_run_missed_does_not_undo_what_came_after_it() -> None:
    store = ClickHouseLikeHistory()
    projector = HistoryProjector(store)
    missed = run_event("RunMissed", 1)
    projector.apply_batch([missed])
    projector.apply_batch([run_event("RunCancelled", 2, reason="deleted"), missed])
    assert [(r.run_status, r.version) for r in store.final_runs()] == [("cancelled", 2)]


def test_an_update_that_moves_a_job_to_another_tenant_is_refused() -> None:
    spec = JobSpec(name="n", tenant="t", queue="q", handler="h", cron="0 * * * *")
    job = Job.create(uuid4(), spec, "r1", T0)
    job.update(replace(spec, name="renamed"), "r2", T0)
    created, updated = (event_to_record(e) for e in job.collect_events())
    moved = (updated[0], {**updated[1], "spec": {**updated[1]["spec"], "tenant": "other"}})
    store = ClickHouseLikeHistory()
    projector = JobHistoryProjector(store)
    projector.apply_batch([created])
    with pytest.raises(JobChangedTenant):
        projector.apply_batch([moved])
    projector.apply_batch([updated])
    assert [(r.tenant, r.name) for r in store.final_jobs()] == [("t", "renamed")]
