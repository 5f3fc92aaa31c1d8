"""`after` and a run's chain cross the gRPC edge unchanged (infra/grpc/convert.py), and a
bad `after` is refused naming its field before the domain sees it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.domain.dependency import DEFAULT_WAIT_WINDOW, Dependency, DependencyCondition
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.spec import JobSpec, validate_spec
from cronlog.infra.grpc.convert import job_out, run_out, spec_in, spec_out
from cronlog.projections.history import AttemptRow
from cronlog.projections.state import JobRow
from cronlog.v1 import job_service_pb2 as pb

UP = [uuid4(), uuid4()]


def _request(**after: object) -> pb.JobSpec:
    return pb.JobSpec(name="n", tenant="t", handler="echo",
                      after=pb.Dependency(**after))  # type: ignore[arg-type]


def test_after_becomes_the_domains_dependency_and_comes_back() -> None:
    message = _request(job_ids=[str(u) for u in UP], condition=pb.DEPENDENCY_CONDITION_FAILURE,
                       wait_window=Duration(seconds=10800))
    spec = validate_spec(spec_in(message))
    assert spec.after == Dependency(tuple(sorted(UP)), DependencyCondition.ON_FAILURE,
                                    timedelta(hours=3))
    assert spec.cron is None and spec.at is None
    out = spec_out(spec)
    assert out.WhichOneof("schedule") == "after"
    assert sorted(out.after.job_ids) == sorted(str(u) for u in UP)
    assert out.after.condition == pb.DEPENDENCY_CONDITION_FAILURE
    assert out.after.wait_window.ToTimedelta() == timedelta(hours=3)
    assert spec_in(out) == spec


def test_unset_condition_and_window_are_the_defaults() -> None:
    spec = spec_in(_request(job_ids=[str(UP[0])]))
    assert spec.after is not None
    assert spec.after.condition is DependencyCondition.ON_SUCCESS
    assert spec.after.wait_window == DEFAULT_WAIT_WINDOW
    assert spec_out(validate_spec(spec)).after.condition == pb.DEPENDENCY_CONDITION_SUCCESS


@pytest.mark.parametrize("condition,expected", [
    (pb.DEPENDENCY_CONDITION_SUCCESS, DependencyCondition.ON_SUCCESS),
    (pb.DEPENDENCY_CONDITION_ANY, DependencyCondition.ON_ANY)])
def test_every_condition_has_its_domain_value(condition: int,
                                              expected: DependencyCondition) -> None:
    spec = spec_in(_request(job_ids=[str(UP[0])], condition=condition))
    assert spec.after is not None and spec.after.condition is expected


@pytest.mark.parametrize("after,field", [
    ({"job_ids": [str(uuid4()) for _ in range(17)]}, "spec.after.job_ids"),
    ({"job_ids": ["not-a-uuid"]}, "spec.after.job_ids"),
    ({"job_ids": ["x" * 100_000]}, "spec.after.job_ids"),
    ({"job_ids": [str(UP[0])], "condition": 99}, "spec.after.condition"),
    ({"job_ids": [str(UP[0])], "wait_window": Duration(seconds=10**12)},
     "spec.after.wait_window"),
])
def test_a_bad_after_names_its_field(after: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        spec_in(_request(**after))
    assert refused.value.field == field
    assert len(str(refused.value)) < 200, "the error never echoes a whole request"


def test_seventeen_upstreams_are_refused_before_any_is_parsed() -> None:
    with pytest.raises(InvalidSpec, match="at most 16 upstream jobs, got 17"):
        spec_in(_request(job_ids=["not-a-uuid"] * 17))


@pytest.mark.parametrize("bounds", [{"start_at": "start_at"}, {"end_at": "end_at"},
                                    {"time_zone": "time_zone"}])
def test_after_with_bounds_or_a_zone_is_refused(bounds: dict[str, str]) -> None:
    message = _request(job_ids=[str(UP[0])])
    name = next(iter(bounds))
    if name == "time_zone":
        message.time_zone = "Europe/Berlin"
    else:
        getattr(message, name).FromDatetime(datetime(2030, 1, 1))
    with pytest.raises(InvalidSpec) as refused:
        validate_spec(spec_in(message))
    assert refused.value.field == f"spec.{name}"


def test_a_job_shows_its_dependents() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    dependents = (uuid4(), uuid4())
    row = JobRow(job_id=uuid4(), partition=0, tenant="t", name="n", status="active",
                 version=2, spec_event=b"", next_fire_at=None, last_fired_at=None,
                 created_at=now, updated_at=now, dependents=dependents)
    spec = JobSpec(name="n", tenant="t", queue="default", handler="echo", cron="* * * * *")
    assert job_out(row, spec).dependent_job_ids == [str(d) for d in dependents]


def _attempt(**chain: object) -> AttemptRow:
    return AttemptRow(scheduled_at_us=1_900_000_000_000_000, tenant="t", job_id=str(uuid4()),
                      run_id=str(uuid4()), attempt=0, queue="default", handler="echo",
                      trigger=str(chain.pop("trigger", "schedule")), max_attempts=3,
                      run_status="scheduled", attempt_status="none",
                      **chain)  # type: ignore[arg-type]


def test_a_dependency_run_shows_its_upstream_runs_logical_time_cascade_and_depth() -> None:
    upstream_runs = (str(uuid4()), str(uuid4()))
    run = run_out([_attempt(trigger="dependency", logical_time_us=1_800_000_000_000_000,
                            cascade="req-1", upstream_run_ids=upstream_runs, depth=2)])
    assert run.trigger == "dependency"
    assert list(run.upstream_run_ids) == list(upstream_runs)
    assert run.logical_time.ToMicroseconds() == 1_800_000_000_000_000
    assert (run.cascade, run.depth) == ("req-1", 2)


def test_a_run_outside_any_chain_has_its_own_fire_time_as_logical_time() -> None:
    run = run_out([_attempt()])
    assert run.logical_time == run.scheduled_at
    assert (list(run.upstream_run_ids), run.cascade, run.depth) == ([], "", 0)
    assert isinstance(UUID(run.run_id), UUID)
