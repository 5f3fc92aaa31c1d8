"""The dependency part of the Postgres projection against a real PostgreSQL (issue 16): an
upstream's dependents, a dependent's waiting ends and settled logical times, read back as
the fan-in a new owner goes on with — whatever order the job and run events are applied in
(a catch-up reads the two topics independently)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.domain.dependency import ChainSlot, Dependency, UpstreamEnd
from cronlog.domain.fan_in import FanIn, Folded
from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.owner_adapters import OwnerStoreAdapter
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from tests.support.logged_events import logged

pytestmark = pytest.mark.integration
T0 = datetime(2026, 1, 1, 2, tzinfo=UTC)


def jobs_a1_a2_d() -> tuple[Job, Job, Job]:
    upstream = JobSpec(name="load", tenant="t", queue="q", handler="echo", cron="0 2 * * *")
    a1 = Job.create(uuid4(), upstream, "a1", T0)
    a2 = Job.create(uuid4(), upstream, "a2", T0)
    d = Job.create(uuid4(), JobSpec(name="report", tenant="t", queue="q", handler="echo",
                                    after=Dependency((a1.id, a2.id))), "d", T0)
    return a1, a2, d


def end(job: Job, run_id: object = None) -> UpstreamEnd:
    return UpstreamEnd(job.id, run_id or uuid4(), "succeeded", ChainSlot(T0), 0)  # type: ignore[arg-type]


def test_dependents_are_kept_and_a_dependent_job_stays_active(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    claim = state.take_epoch(0, "o")
    a1, _, d = jobs_a1_a2_d()
    a1.link_dependent(d.id, T0)
    jobs, runs = logged([*a1.collect_events(), *d.collect_events()])
    state.apply(0, claim.epoch, jobs, runs)
    stored_a1, stored_d = state.job(a1.id), state.job(d.id)
    assert stored_a1 is not None and stored_a1.dependents == (d.id,)
    assert stored_d is not None and stored_d.status == "active"
    assert state.jobs_with_dependents([0]) == [(0, a1.id)]
    a1.unlink_dependent(d.id, T0)
    jobs, runs = logged(list(a1.collect_events()), first_offset=10)
    state.apply(0, claim.epoch, jobs, runs)
    assert state.jobs_with_dependents([0]) == []


@pytest.mark.parametrize("runs_first", [False, True])
def test_a_fan_in_is_read_back_as_it_was_left(isolated: Settings, runs_first: bool) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    store = OwnerStoreAdapter(state, AvroCodec())
    claim = state.take_epoch(0, "o")
    a1, a2, d = jobs_a1_a2_d()
    assert d.spec.after is not None
    fan_in = FanIn(d.id, d.spec.after)
    # 02:00 waits for A2; 03:00 is decided (both came): its run settles it.
    first = end(a1)
    fold = fan_in.record(first, T0 + timedelta(minutes=10))
    d.record_upstream(first, fold, None, T0 + timedelta(minutes=10))
    later = ChainSlot(T0 + timedelta(hours=1))
    ends = [UpstreamEnd(a1.id, uuid4(), "succeeded", later, 0),
            UpstreamEnd(a2.id, uuid4(), "succeeded", later, 0)]
    opened = None
    runs = []
    for e in ends:
        fold = fan_in.record(e, T0 + timedelta(hours=1, minutes=5))
        d.record_upstream(e, fold, opened, T0 + timedelta(hours=1, minutes=5))
        opened = fan_in.opened_at(later) or opened or T0 + timedelta(hours=1, minutes=5)
        for decision in fold.decisions:
            runs.extend(d.run_after(decision, T0 + timedelta(hours=1, minutes=5), []))
    assert fold.folded == Folded.DECIDED and len(runs) == 1
    job_events, _ = logged([*a1.collect_events(), *a2.collect_events(), *d.collect_events()])
    _, run_events = logged([e for r in runs for e in r.collect_events()])
    if runs_first:
        state.apply(0, claim.epoch, [], run_events)
        state.apply(0, claim.epoch, job_events, [])
    else:
        state.apply(0, claim.epoch, job_events, run_events)
    job = store.job(d.id)
    assert job is not None
    restored = store.fan_in(job)
    assert restored.waiting() == {ChainSlot(T0): (a2.id,)}
    assert restored.opened_at(ChainSlot(T0)) == T0 + timedelta(minutes=10)
    assert store.waiting_fan_ins([0]) == [(0, d.id, T0 + timedelta(minutes=10))]
    # The decided logical time is settled: an end for it again is a duplicate, not new.
    again = restored.record(ends[0], T0 + timedelta(hours=1, minutes=6))
    assert again.folded == Folded.DUPLICATE and again.decisions == ()
    assert restored.record(end(a2), T0 + timedelta(minutes=20)).folded == Folded.DECIDED
