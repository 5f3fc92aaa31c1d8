"""Job dependencies' contract: validation naming the field, conditions, cycles named by their
path, and dependent run ids that do not depend on the order upstream ends arrive in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID, uuid4

import pytest

from cronlog.domain.dependency import (
    MAX_UPSTREAMS,
    ChainSlot,
    Dependency,
    DependencyCondition,
    UpstreamEnd,
    dependent_run_id,
    meets,
    require_upstream_end,
    validate_dependency,
)
from cronlog.domain.dependency_graph import DependencyCycle, find_cycle, require_acyclic
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.run_states import CANCELLED, DEAD_LETTERED, MISSED, SKIPPED, SUCCEEDED

A, B, C, D = (UUID(int=n) for n in (1, 2, 3, 4))
T = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)


def test_a_good_dependency_comes_back_with_its_upstreams_in_order() -> None:
    dependency = validate_dependency(Dependency((C, A, B)), job_id=D)
    assert dependency.job_ids == (A, B, C)
    assert dependency.condition is DependencyCondition.ON_SUCCESS


@pytest.mark.parametrize(("field", "dependency", "words"), [
    ("spec.after.job_ids", Dependency(()), "at least one"),
    ("spec.after.job_ids", Dependency(tuple(uuid4() for _ in range(MAX_UPSTREAMS + 1))),
     f"at most {MAX_UPSTREAMS}"),
    ("spec.after.job_ids", Dependency((A, B, A)), "named twice"),
    ("spec.after.job_ids", Dependency((A, D)), "after itself"),
    ("spec.after.job_ids", Dependency(("not-an-id",)), "not a job id"),  # type: ignore[arg-type]
    ("spec.after.condition", Dependency((A,), "sometimes"),  # type: ignore[arg-type]
     "not one of success, failure, any"),
    ("spec.after.wait_window", Dependency((A,), wait_window=timedelta(0)), "positive"),
    ("spec.after.wait_window", Dependency((A,), wait_window=timedelta(days=7, seconds=1)),
     "at most 7 days"),
])
def test_a_bad_dependency_is_refused_naming_its_field(field: str, dependency: Dependency,
                                                       words: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        validate_dependency(dependency, job_id=D)
    assert refused.value.field == field
    assert words in refused.value.message


def test_the_bounds_themselves_are_accepted() -> None:
    upstreams = tuple(uuid4() for _ in range(MAX_UPSTREAMS))
    dependency = validate_dependency(Dependency(upstreams, wait_window=timedelta(days=7)))
    assert len(dependency.job_ids) == MAX_UPSTREAMS


@pytest.mark.parametrize(("condition", "met_by"), [
    (DependencyCondition.ON_SUCCESS, {SUCCEEDED}),
    (DependencyCondition.ON_FAILURE, {DEAD_LETTERED}),
    (DependencyCondition.ON_ANY, {SUCCEEDED, DEAD_LETTERED, CANCELLED}),
])
def test_each_condition_is_met_by_exactly_its_ends(condition: DependencyCondition,
                                                   met_by: set[str]) -> None:
    for status in (SUCCEEDED, DEAD_LETTERED, CANCELLED, MISSED, SKIPPED):
        assert meets(condition, status) is (status in met_by), status


def test_a_missed_or_skipped_upstream_run_meets_no_condition() -> None:
    for condition in DependencyCondition:
        assert not meets(condition, MISSED)
        assert not meets(condition, SKIPPED)


def test_the_dependent_run_id_is_the_same_in_any_order_and_with_repeats() -> None:
    runs = [uuid4() for _ in range(3)]
    first = dependent_run_id(D, runs)
    assert dependent_run_id(D, reversed(runs)) == first
    assert dependent_run_id(D, [*runs, runs[0]]) == first
    assert dependent_run_id(D, runs[:2]) != first
    assert dependent_run_id(C, runs) != first


def test_the_dependent_run_id_is_fixed_forever() -> None:
    # Changing the namespace or the text it hashes would run every chain again after a deploy.
    assert dependent_run_id(D, [A, B]) == UUID("82f938e3-fe73-55f1-8229-249d5f914cf2")


def test_an_upstream_end_is_checked_and_its_logical_time_normalised_to_utc() -> None:
    berlin = timezone(timedelta(hours=1))
    end = require_upstream_end(UpstreamEnd(A, uuid4(), SUCCEEDED,
                                           ChainSlot(T.astimezone(berlin))))
    assert end.slot.logical_time.tzinfo is UTC
    assert end.slot == ChainSlot(T)
    with pytest.raises(InvalidSpec) as refused:
        require_upstream_end(UpstreamEnd(A, uuid4(), "running", ChainSlot(T)))
    assert refused.value.field == "status"
    with pytest.raises(InvalidSpec) as refused:
        require_upstream_end(UpstreamEnd(A, uuid4(), SUCCEEDED, ChainSlot(T), depth=65))
    assert refused.value.field == "depth"
    with pytest.raises(InvalidSpec) as refused:
        require_upstream_end(UpstreamEnd(A, uuid4(), SUCCEEDED,
                                         ChainSlot(datetime(2200, 1, 1, tzinfo=UTC))))
    assert refused.value.field == "logical_time"
    with pytest.raises(InvalidSpec) as refused:
        require_upstream_end(UpstreamEnd(A, uuid4(), SUCCEEDED, ChainSlot(T, "x" * 201)))
    assert refused.value.field == "cascade"
    assert require_upstream_end(UpstreamEnd(A, uuid4(), SUCCEEDED, ChainSlot(T, "x" * 200)))


def test_a_job_after_itself_is_a_cycle_of_one() -> None:
    assert find_cycle(A, [A], {}) == (A, A)
    with pytest.raises(DependencyCycle) as refused:
        require_acyclic(A, [A], {})
    assert refused.value.field == "spec.after.job_ids"


def test_a_direct_cycle_is_named() -> None:
    # B runs after A; making A run after B closes A -> B -> A.
    with pytest.raises(DependencyCycle) as refused:
        require_acyclic(A, [B], {B: [A]})
    assert refused.value.path == (A, B, A)
    assert f"{A} runs after {B} runs after {A}" in str(refused.value)


def test_an_indirect_cycle_is_named_along_its_whole_path() -> None:
    graph = {B: [C], C: [D], D: [A]}
    assert find_cycle(A, [B], graph) == (A, B, C, D, A)


def test_a_diamond_is_no_cycle_and_the_job_being_changed_is_read_from_its_new_upstreams() -> None:
    # D after B and C, both after A: shared ancestors are fine.
    assert find_cycle(D, [B, C], {B: [A], C: [A], A: []}) is None
    # An old entry for the job being updated does not count: it is being replaced.
    assert find_cycle(A, [B], {A: [A], B: []}) is None


def test_a_cycle_not_through_the_changed_job_is_not_its_concern_and_the_walk_terminates() -> None:
    assert find_cycle(D, [A], {A: [B], B: [A]}) is None


def test_a_long_chain_is_walked_without_recursion() -> None:
    chain = [uuid4() for _ in range(20_000)]
    graph = {chain[i]: [chain[i + 1]] for i in range(len(chain) - 1)}
    graph[chain[-1]] = [A]
    path = find_cycle(A, [chain[0]], graph)
    assert path is not None
    assert path[0] == path[-1] == A
    assert len(path) == len(chain) + 2
