"""CreateJobs at the gRPC edge: the batch's bounds, each item's tenant, and each outcome as
a result naming the item's field."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import uuid4

import pytest

from cronlog.commands.api.job_api import CommandRejected
from cronlog.commands.api.job_batch import BatchItem, ItemCreated, ItemOutcome
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.limits import TenantLimitReached
from cronlog.infra.grpc import create_jobs as edge
from cronlog.infra.kafka.command_channel import CommandNotAnswered
from cronlog.v1 import job_service_pb2 as pb


def spec(**fields: object) -> pb.JobSpec:
    values: dict[str, object] = {"name": "n", "handler": "echo", "cron": "0 * * * *", **fields}
    return pb.JobSpec(**values)  # type: ignore[arg-type]


class Batch:
    """Records what reaches the application layer; answers each item as told."""

    def __init__(self, answer: ItemOutcome | None = None) -> None:
        self.items: list[BatchItem] = []
        self.answer = answer

    def create_jobs(self, items: Sequence[BatchItem]) -> list[ItemOutcome]:
        self.items = list(items)
        return [self.answer or ItemCreated(uuid4(), 1, False) for _ in items]


def answer(request: pb.CreateJobsRequest, caller: str | None,
           batch: Batch | None = None) -> pb.CreateJobsResponse:
    return edge.create_jobs(request, caller, batch or Batch())  # type: ignore[arg-type]


def test_more_than_a_thousand_items_is_refused_whole_naming_items() -> None:
    request = pb.CreateJobsRequest(items=[pb.CreateJobRequest(request_id=str(n), spec=spec())
                                          for n in range(1001)])
    with pytest.raises(InvalidSpec) as refused:
        answer(request, None)
    assert refused.value.field == "items" and "1000" in str(refused.value)
    edge.check_bounds(pb.CreateJobsRequest(items=request.items[:1000]))


def test_more_than_three_mib_is_refused_whole_naming_items() -> None:
    big = [pb.CreateJobRequest(request_id=str(n), spec=spec(payload=b"x" * 256 * 1024))
           for n in range(13)]
    with pytest.raises(InvalidSpec) as refused:
        edge.check_bounds(pb.CreateJobsRequest(items=big))
    assert refused.value.field == "items"
    edge.check_bounds(pb.CreateJobsRequest(items=big[:11]))


def test_another_tenants_item_is_refused_alone_and_never_reaches_the_owners() -> None:
    batch = Batch()
    request = pb.CreateJobsRequest(items=[
        pb.CreateJobRequest(request_id="mine", spec=spec(tenant="alpha")),
        pb.CreateJobRequest(request_id="theirs", spec=spec(tenant="beta")),
        pb.CreateJobRequest(request_id="unnamed", spec=spec())])
    results = answer(request, "alpha", batch).results
    assert [r.WhichOneof("outcome") for r in results] == ["job", "error", "job"]
    assert (results[1].error.code, results[1].error.field) == (
        "PERMISSION_DENIED", "items[1].spec.tenant")
    assert [(i.request_id, i.spec.tenant) for i in batch.items] == [
        ("mine", "alpha"), ("unnamed", "alpha")]
    # The caller's request is left as sent.
    assert request.items[2].spec.tenant == ""


def test_without_authentication_the_tenant_is_the_items_own() -> None:
    batch = Batch()
    answer(pb.CreateJobsRequest(items=[
        pb.CreateJobRequest(request_id="a", spec=spec(tenant="beta"))]), None, batch)
    assert batch.items[0].spec.tenant == "beta"


def test_an_item_without_a_spec_or_with_a_bad_one_names_its_field() -> None:
    results = answer(pb.CreateJobsRequest(items=[
        pb.CreateJobRequest(request_id="a"),
        pb.CreateJobRequest(request_id="b", spec=spec(misfire_policy=99))]), None).results
    assert [(r.error.code, r.error.field) for r in results] == [
        ("INVALID_ARGUMENT", "items[0].spec"), ("INVALID_ARGUMENT", "items[1].spec.misfire_policy")]


@pytest.mark.parametrize(("outcome", "code", "field"), [
    (InvalidSpec("spec.cron", "bad"), "INVALID_ARGUMENT", "items[0].spec.cron"),
    (CommandRejected("FAILED_PRECONDITION", "no", "request_id"), "FAILED_PRECONDITION",
     "items[0].request_id"),
    (TenantLimitReached("full"), "RESOURCE_EXHAUSTED", ""),
    (CommandNotAnswered("late"), "UNAVAILABLE", ""),
    (KeyError("bug"), "INTERNAL", ""),
])
def test_each_outcome_is_a_status_name_and_a_field(outcome: Exception, code: str,
                                                   field: str) -> None:
    result = answer(pb.CreateJobsRequest(items=[
        pb.CreateJobRequest(request_id="a", spec=spec(tenant="t"))]), None,
        Batch(outcome)).results[0]
    assert (result.request_id, result.error.code, result.error.field) == ("a", code, field)
    if code == "INTERNAL":
        assert "bug" not in result.error.message


def test_a_long_reason_is_cut_so_a_thousand_fit_one_response() -> None:
    result = answer(pb.CreateJobsRequest(items=[
        pb.CreateJobRequest(request_id="a", spec=spec(tenant="t"))]), None,
        Batch(InvalidSpec("spec.cron", "x" * 10_000))).results[0]
    assert len(result.error.message) == edge.MOST_MESSAGE_CHARS


def test_a_created_job_carries_its_id_version_and_whether_it_existed() -> None:
    job_id = uuid4()
    result = answer(pb.CreateJobsRequest(items=[
        pb.CreateJobRequest(request_id="a", spec=spec(tenant="t"))]), None,
        Batch(ItemCreated(job_id, 3, True))).results[0]
    assert (result.job.job_id, result.job.version, result.job.already_existed) == (
        str(job_id), 3, True)
