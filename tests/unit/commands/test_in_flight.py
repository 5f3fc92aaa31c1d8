from __future__ import annotations

from uuid import uuid4

from cronlog.commands.in_flight import InFlightRuns


def test_counts_by_tenant_follow_every_change() -> None:
    runs = InFlightRuns()
    a, b, c = uuid4(), uuid4(), uuid4()
    job = uuid4()
    runs.put(a, "t1", 0, job)
    runs.put(b, "t1", 1, job)
    runs.put(c, "t2", 1, job)
    assert runs.by_tenant() == {"t1": 2, "t2": 1}
    runs.put(a, "t1", 0, job)  # the same run again: still one
    assert runs.by_tenant() == {"t1": 2, "t2": 1} and len(runs) == 3
    runs.discard(b)
    runs.discard(b)  # gone already: nothing changes
    assert runs.by_tenant() == {"t1": 1, "t2": 1}
    runs.drop_partitions({1})
    assert runs.by_tenant() == {"t1": 1} and c not in runs and a in runs
    assert runs.a_job_of("t1") == job and runs.a_job_of("t2") is None


def test_a_cycle_adjusts_a_copy_not_the_counts() -> None:
    runs = InFlightRuns()
    runs.put(uuid4(), "t", 0, uuid4())
    counts = runs.by_tenant()
    counts["t"] += 5
    assert runs.by_tenant() == {"t": 1}
