"""Dependencies (issue 16) in the history projections: every new record version is known,
the chain fields of a run reach its rows, the dependency events their rows, and the audit
says why a dependency run exists."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from cronlog.domain.catalogue import JobEvent, RunEvent
from cronlog.infra.avro.codec import AvroCodec
from cronlog.projections.audit import timeline, why_dependency_runs
from cronlog.projections.combined_history import CombinedHistoryProjector
from cronlog.projections.history import HistoryProjector, UnstorableEvent, micros
from cronlog.projections.job_history import JobHistoryProjector, MissingJob
from tests.support.clickhouse_history import ClickHouseLikeHistory
from tests.unit.avro.examples import AT, EXAMPLES, JOB, RUN, UPSTREAM, UPSTREAM_RUN

CODEC = AvroCodec()


def coded(name: str, schema_version: int, **changes: Any) -> tuple[str, dict[str, Any]]:
    """The example of that schema version as the log hands it to a projector."""
    version_of = {v.name: v for v in CODEC.versions() if v.version == schema_version}
    body = CODEC.encode_with(version_of[name], {**EXAMPLES[(name, schema_version)], **changes})
    return CODEC.decode(body)


def projectors(store: ClickHouseLikeHistory) -> CombinedHistoryProjector:
    return CombinedHistoryProjector(HistoryProjector(store), JobHistoryProjector(store))


def created() -> tuple[str, dict[str, Any]]:
    return coded("JobCreated", 4, version=1)


def test_each_new_run_version_fills_the_chain_columns() -> None:
    for name, version in ((RunEvent.SCHEDULED, 3), (RunEvent.MISSED, 2)):
        store = ClickHouseLikeHistory()
        projectors(store).apply_batch([coded(name, version)])
        (row,) = store.final_runs()
        assert (row.trigger, row.logical_time_us, row.cascade, row.upstream_run_ids,
                row.depth) == ("dependency", micros(AT), "", (str(UPSTREAM_RUN),), 1), name


def test_a_run_outside_any_chain_has_its_fire_time_as_logical_time() -> None:
    store = ClickHouseLikeHistory()
    projectors(store).apply_batch([coded(RunEvent.SKIPPED, 2,
                                         scheduled_at=AT + timedelta(minutes=1))])
    (row,) = store.final_runs()
    assert (row.trigger, row.logical_time_us, row.cascade, row.upstream_run_ids,
            row.depth) == ("schedule", micros(AT + timedelta(minutes=1)), None, (), 0)
    assert row.run_status == "skipped"


def test_old_run_versions_read_as_outside_any_chain() -> None:
    store = ClickHouseLikeHistory()
    projectors(store).apply_batch([coded(RunEvent.MISSED, 1)])
    (row,) = store.final_runs()
    assert (row.trigger, row.logical_time_us, row.cascade, row.depth) == (
        "schedule", micros(AT), None, 0)


def test_every_dependency_event_is_a_row_and_links_set_the_dependents() -> None:
    store = ClickHouseLikeHistory()
    events = [created(),
              coded(JobEvent.DEPENDENT_LINKED, 1, version=2),
              coded(JobEvent.UPSTREAM_RECORDED, 1, version=3),
              coded(JobEvent.UPSTREAM_UNAVAILABLE, 1, version=4),
              coded(JobEvent.DEPENDENT_UNLINKED, 1, version=5)]
    projectors(store).apply_batch(events)
    projectors(store).apply_batch(events)  # redelivered
    rows = sorted(store.final_dependency_events(), key=lambda r: r.version)
    assert [(r.event_type, r.tenant) for r in rows] == [
        (JobEvent.DEPENDENT_LINKED, "acme"), (JobEvent.UPSTREAM_RECORDED, "acme"),
        (JobEvent.UPSTREAM_UNAVAILABLE, "acme"), (JobEvent.DEPENDENT_UNLINKED, "acme")]
    recorded = rows[1]
    assert (recorded.upstream_job_id, recorded.upstream_run_id, recorded.upstream_status,
            recorded.folded, recorded.cascade, recorded.logical_time_us,
            recorded.opened_at_us) == (str(UPSTREAM), str(UPSTREAM_RUN), "dead_lettered",
                                       "closed", "", micros(AT), micros(AT))
    assert rows[2].reason == "job not found" and rows[0].dependent_job_id == str(JOB)
    (job,) = store.final_jobs()
    assert job.status == "active", "a dependent job has no fire time and is not completed"
    assert job.after_job_ids == (str(UPSTREAM), str(JOB)) and job.after_condition == "success"
    assert job.wait_window_ms == 3_600_000
    assert job.dependent_job_ids == (str(RUN),) and job.version == 5


def test_a_dependency_event_of_an_unknown_job_fails_only_its_batch() -> None:
    store = ClickHouseLikeHistory()
    with pytest.raises(MissingJob):
        projectors(store).apply_batch([coded(JobEvent.UPSTREAM_RECORDED, 1)])
    assert store.dependency == []


def test_a_depth_or_time_the_columns_cannot_hold_is_set_aside_before_any_insert() -> None:
    store = ClickHouseLikeHistory()
    with pytest.raises(UnstorableEvent, match="depth"):
        projectors(store).apply_batch([coded(RunEvent.SCHEDULED, 3, depth=-1)])
    with pytest.raises(UnstorableEvent, match="logical_time"):
        projectors(store).apply_batch([created(), coded(
            JobEvent.UPSTREAM_RECORDED, 1, version=3,
            logical_time=AT.replace(year=1969))])
    assert store.runs == [] and store.dependency == []


def test_audit_says_why_a_dependency_run_exists() -> None:
    job_events = [created(), coded(JobEvent.UPSTREAM_RECORDED, 1, version=3,
                                   status="succeeded", folded="decided", reason=None)]
    other_upstream = UUID("12345678-1234-5678-1234-567812345678")
    run_events = [coded(RunEvent.SCHEDULED, 3,
                        upstream_run_ids=[UPSTREAM_RUN, other_upstream], depth=2,
                        cascade="req-9")]
    lines = why_dependency_runs(job_events, run_events)
    assert lines[0].startswith(f"run {RUN} scheduled at {AT.isoformat()}")
    assert f"logical time {AT.isoformat()}, cascade request:req-9, depth 2" in lines[0]
    assert lines[1] == (f"  upstream run {UPSTREAM_RUN}: job {UPSTREAM} ended succeeded "
                        f"(recorded {AT.isoformat()}, slot opened {AT.isoformat()}, decided)")
    assert lines[2] == f"  upstream run {other_upstream}: its end is not in this job's log"
    entries = {e.event: e for e in timeline([*job_events, *run_events])}
    recorded = entries[JobEvent.UPSTREAM_RECORDED]
    assert recorded.actor == "owner (dependency)"
    assert f"upstream_run_id={UPSTREAM_RUN} status=succeeded" in recorded.details
    assert "cascade=scheduled" in recorded.details and "folded=decided" in recorded.details
    assert f"upstream_run_ids={UPSTREAM_RUN},{other_upstream}" in entries[
        RunEvent.SCHEDULED].details


def test_audit_names_a_missed_dependency_run_s_reason_and_skips_other_runs() -> None:
    missed = coded(RunEvent.MISSED, 2)
    plain = coded(RunEvent.SKIPPED, 2)
    lines = why_dependency_runs([], [missed, plain])
    assert "recorded MISSED" in lines[0] and "cascade scheduled, depth 1" in lines[0]
    assert lines[1] == "  reason: upstream job(s) x did not end within the wait window"
    assert len(lines) == 3
    assert "cascade" not in timeline([plain])[0].details
