"""The api's check of `after` (commands/api/upstream_check.py) over a fake tenant graph."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from uuid import UUID, uuid4

import pytest

from cronlog.commands.api.upstream_check import (
    ChainTooDeep,
    UpstreamNotFound,
    check_upstreams,
)
from cronlog.domain.dependency import MAX_CHAIN_DEPTH, Dependency
from cronlog.domain.dependency_graph import DependencyCycle
from cronlog.domain.errors import InvalidSpec

FIELD = "spec.after.job_ids"


class Jobs:
    """Jobs by id: (tenant, the jobs it runs after); counts what each read asked for."""

    def __init__(self) -> None:
        self.jobs: dict[UUID, tuple[str, tuple[UUID, ...]]] = {}
        self.reads: list[set[UUID]] = []

    def add(self, tenant: str = "t", *after: UUID) -> UUID:
        job_id = uuid4()
        self.jobs[job_id] = (tenant, after)
        return job_id

    def upstreams(self, tenant: str,
                  job_ids: Collection[UUID]) -> Mapping[UUID, tuple[UUID, ...]]:
        self.reads.append(set(job_ids))
        return {j: self.jobs[j][1] for j in job_ids
                if j in self.jobs and self.jobs[j][0] == tenant}


def after(*job_ids: UUID) -> Dependency:
    return Dependency(tuple(job_ids))


def test_upstreams_of_the_tenant_that_close_no_cycle_pass() -> None:
    jobs = Jobs()
    a = jobs.add()
    b = jobs.add("t", a)
    c = jobs.add("t", a, b)
    check_upstreams(uuid4(), "t", after(b, c), jobs)


@pytest.mark.parametrize("where", ["missing", "other tenant"])
def test_a_missing_upstream_and_another_tenants_read_the_same(where: str) -> None:
    jobs = Jobs()
    upstream = uuid4() if where == "missing" else jobs.add("other")
    with pytest.raises(UpstreamNotFound) as refused:
        check_upstreams(uuid4(), "t", after(jobs.add(), upstream), jobs)
    assert refused.value.field == FIELD
    assert str(refused.value).endswith(f"job {upstream} not found")


def test_a_job_cannot_run_after_itself() -> None:
    jobs = Jobs()
    me = jobs.add()
    with pytest.raises(InvalidSpec, match="itself") as refused:
        check_upstreams(me, "t", after(me), jobs)
    assert refused.value.field == FIELD
    assert jobs.reads == [], "refused before any read"


def test_an_update_that_closes_a_cycle_is_refused_naming_it() -> None:
    jobs = Jobs()
    a = jobs.add()
    b = jobs.add("t", a)
    c = jobs.add("t", b)
    with pytest.raises(DependencyCycle) as refused:
        check_upstreams(a, "t", after(c), jobs)  # A after C after B after A
    assert refused.value.field == FIELD
    assert refused.value.path == (a, c, b, a)
    assert f"{a} runs after {c} runs after {b} runs after {a}" in str(refused.value)


def test_the_jobs_own_stored_after_is_not_read_it_is_being_replaced() -> None:
    jobs = Jobs()
    a = jobs.add()
    b = jobs.add("t", a)
    jobs.jobs[a] = ("t", (b,))  # a stored cycle through A itself; A's update drops it
    other = jobs.add()
    check_upstreams(a, "t", after(other), jobs)
    assert all(a not in read for read in jobs.reads)


def test_each_job_is_read_once_one_query_per_level() -> None:
    jobs = Jobs()
    root = jobs.add()
    left, right = jobs.add("t", root), jobs.add("t", root)
    joined = jobs.add("t", left, right)
    check_upstreams(uuid4(), "t", after(joined, left), jobs)
    assert jobs.reads == [{joined, left}, {right, root}]


def test_a_deleted_job_named_upstream_is_a_leaf() -> None:
    jobs = Jobs()
    gone = uuid4()
    middle = jobs.add("t", gone)
    check_upstreams(uuid4(), "t", after(middle), jobs)


def test_a_chain_deeper_than_a_run_may_be_is_refused_after_bounded_reads() -> None:
    jobs = Jobs()
    top = jobs.add()
    for _ in range(MAX_CHAIN_DEPTH - 1):
        top = jobs.add("t", top)
    check_upstreams(uuid4(), "t", after(top), jobs)  # exactly the deepest allowed
    assert len(jobs.reads) == MAX_CHAIN_DEPTH
    deeper = jobs.add("t", top)
    jobs.reads.clear()
    with pytest.raises(ChainTooDeep) as refused:
        check_upstreams(uuid4(), "t", after(deeper), jobs)
    assert refused.value.field == FIELD
    assert len(jobs.reads) == MAX_CHAIN_DEPTH + 1
