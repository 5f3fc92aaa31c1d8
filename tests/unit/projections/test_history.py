from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from cronlog.projections.history import (
    HistoryProjector,
    MissingRun,
    UnknownRunEvent,
)
from tests.support.history_rows import Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run_events(run_id: str, job_id: str) -> list[tuple[str, dict[str, Any]]]:
    base = {"run_id": run_id, "job_id": job_id}
    return [
        ("RunScheduled", {**base, "version": 1, "at": T0, "tenant": "t", "queue": "q",
                          "handler": "fail", "scheduled_at": T0 + timedelta(seconds=2),
                          "not_before": T0 + timedelta(seconds=2), "trigger": "schedule",
                          "max_attempts": 2}),
        ("AttemptDispatched", {**base, "version": 2, "at": T0, "attempt": 1,
                               "not_before": T0 + timedelta(seconds=2), "timeout_ms": 100}),
        ("AttemptStarted", {**base, "version": 3, "at": T0, "attempt": 1, "worker": "w",
                            "started_at": T0 + timedelta(seconds=2, milliseconds=40)}),
        ("AttemptFailed", {**base, "version": 4, "at": T0, "attempt": 1, "worker": "w",
                           "finished_at": T0 + timedelta(seconds=3), "error": "X: no",
                           "output": b"", "output_truncated": False}),
        ("AttemptDispatched", {**base, "version": 5, "at": T0, "attempt": 2,
                               "not_before": T0 + timedelta(seconds=4), "timeout_ms": 100}),
        ("AttemptStarted", {**base, "version": 6, "at": T0, "attempt": 2, "worker": "w",
                            "started_at": T0 + timedelta(seconds=4, milliseconds=10)}),
        ("AttemptSucceeded", {**base, "version": 7, "at": T0, "attempt": 2, "worker": "w",
                              "finished_at": T0 + timedelta(seconds=5), "output": b"ok",
                              "output_truncated": False}),
        ("RunSucceeded", {**base, "version": 8, "at": T0}),
    ]


def test_attempt_rows_carry_lag_status_and_the_latest_version() -> None:
    store = Store()
    run_id, job_id = str(uuid4()), str(uuid4())
    HistoryProjector(store).apply_batch(run_events(run_id, job_id))
    first, second = store.rows[(run_id, 1)], store.rows[(run_id, 2)]
    assert first.attempt_status == "failed" and first.error == "X: no"
    assert first.start_lag_us == 40_000
    assert second.attempt_status == "succeeded" and second.output == "ok"
    assert second.start_lag_us == 10_000
    assert {first.run_status, second.run_status} == {"succeeded"}
    assert len(store.events) == 8


def test_a_success_that_carries_its_start_gives_the_row_the_started_one_had() -> None:
    run_id, job_id = str(uuid4()), str(uuid4())
    apart = [e for e in run_events(run_id, job_id) if e[0] != "RunSucceeded"]
    started = apart[5][1]
    merged = [*apart[:5], ("AttemptSucceeded", {**apart[6][1], "version": 6,
                                                "started_at": started["started_at"]})]
    both, one = Store(), Store()
    HistoryProjector(both).apply_batch(apart)
    HistoryProjector(one).apply_batch(merged)
    expected, got = both.rows[(run_id, 2)], one.rows[(run_id, 2)]
    assert got.start_lag_us == 10_000 and got.attempt_status == "succeeded"
    assert got.started_at_us == expected.started_at_us
    assert got.finished_at_us == expected.finished_at_us and got.worker == expected.worker


def test_redelivery_and_a_restarted_projector_give_the_same_rows() -> None:
    store = Store()
    run_id, job_id = str(uuid4()), str(uuid4())
    events = run_events(run_id, job_id)
    HistoryProjector(store).apply_batch(events[:4])
    # A new projector (restart) sees some events again, then the rest.
    HistoryProjector(store).apply_batch(events[2:])
    once = Store()
    HistoryProjector(once).apply_batch(events)
    assert store.rows == once.rows


def test_the_projection_stops_on_what_it_cannot_apply() -> None:
    with pytest.raises(UnknownRunEvent):
        HistoryProjector(Store()).apply_batch([("SomethingElse", {})])
    with pytest.raises(MissingRun):
        HistoryProjector(Store()).apply_batch([run_events(str(uuid4()), str(uuid4()))[2]])


def test_an_attempts_last_progress_is_on_its_row_and_stays_after_it_ends() -> None:
    store = Store()
    run_id, job_id = str(uuid4()), str(uuid4())
    events = run_events(run_id, job_id)
    base = {"run_id": run_id, "job_id": job_id, "at": T0, "attempt": 2, "worker": "w"}
    progress = [("AttemptProgressed", {**base, "version": 7, "details": b"1/2",
                                       "progressed_at": T0 + timedelta(seconds=4.5)}),
                ("AttemptProgressed", {**base, "version": 8, "details": b"2/2 \xff",
                                       "progressed_at": T0 + timedelta(seconds=4.8)})]
    ended = [(name, {**record, "version": record["version"] + 2})
             for name, record in events[6:]]
    HistoryProjector(store).apply_batch([*events[:6], *progress, *ended])
    first, second = store.rows[(run_id, 1)], store.rows[(run_id, 2)]
    assert (first.progress, first.progress_at_us) == ("", 0)
    assert second.progress == "2/2 \ufffd" and second.attempt_status == "succeeded"
    assert second.progress_at_us == int((T0 + timedelta(seconds=4.8)).timestamp() * 1e6)


def test_a_redriven_dead_letter_is_no_longer_one_and_its_new_attempts_follow() -> None:
    store = Store()
    run_id, job_id = str(uuid4()), str(uuid4())
    base = {"run_id": run_id, "job_id": job_id, "at": T0}
    events = run_events(run_id, job_id)[:4]
    dead = [("RunFailed", {**base, "version": 5, "reason": "attempt 1 of 1 failed: X: no"})]
    redriven = [
        ("RunRedriven", {**base, "version": 6, "request_id": "r", "requested_by": "t",
                         "attempts_before": 1}),
        ("AttemptDispatched", {**base, "version": 7, "attempt": 2,
                               "not_before": T0 + timedelta(seconds=9), "timeout_ms": 100}),
    ]
    projector = HistoryProjector(store)
    projector.apply_batch([*events, *dead])
    assert store.rows[(run_id, 1)].run_status == "dead_lettered"
    projector.apply_batch(redriven)
    first, second = store.rows[(run_id, 1)], store.rows[(run_id, 2)]
    assert (first.run_status, first.reason) == ("scheduled", "")
    assert (second.attempt_status, second.run_status, second.reason) == (
        "dispatched", "scheduled", "")
    assert first.attempt_status == "failed", "the earlier attempt keeps its end"
