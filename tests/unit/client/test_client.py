"""CronlogClient against a fake stub: what each call sends (token, deadline, request id),
how a refusal becomes ApiError, and paging across pages."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from cronlog.client import (
    ApiError,
    CronlogClient,
    Page,
    Retries,
    Timeouts,
    connect,
    every_item,
)
from cronlog.client.errors import api_error
from cronlog.v1 import job_service_pb2 as pb


class Refusal(grpc.RpcError, grpc.Call):
    """What a stub raises: an RpcError that is also the call, with trailing metadata."""

    def __init__(self, code: grpc.StatusCode, details: str | None,
                 trailing: Sequence[tuple[str, str | bytes]] = ()) -> None:
        self._code, self._details, self._trailing = code, details, tuple(trailing)

    def code(self) -> grpc.StatusCode:
        return self._code

    # grpc-stubs' Call says details are always there, its RpcError that they may not be;
    # test_an_error_without_details_or_field_still_reads_as_one_line needs one without.
    def details(self) -> str | None:  # type: ignore[override]
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailing


class Rpc:
    """One method of the fake stub: records each call, answers with `answer(request)`."""

    def __init__(self, answer: Callable[[Any], Any]) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, float, Any]] = []

    def __call__(self, request: Any, timeout: float, metadata: Any) -> Any:
        self.calls.append((request, timeout, metadata))
        return self.answer(request)


class Stub:
    def __init__(self, **rpcs: Rpc) -> None:
        self.__dict__.update(rpcs)


def client_of(token: str | None = None, **rpcs: Rpc) -> CronlogClient:
    return CronlogClient(stub=Stub(**rpcs), token=token,  # type: ignore[arg-type]
                         timeouts=Timeouts(read=1.0, write=2.0, batch=3.0))


def refuse(error: Refusal) -> Callable[[Any], Any]:
    def answer(request: Any) -> Any:
        raise error
    return answer


def test_a_refusal_becomes_an_api_error_with_its_status_reason_and_field() -> None:
    rpc = Rpc(refuse(Refusal(grpc.StatusCode.INVALID_ARGUMENT, "spec.cron: not a cron expression",
                             [("cronlog-field", "spec.cron"), ("other", "x")])))
    with pytest.raises(ApiError) as raised:
        client_of(CreateJob=rpc).create_job(pb.JobSpec(cron="nope"))
    error = raised.value
    assert (error.code, error.message, error.field) == (
        grpc.StatusCode.INVALID_ARGUMENT, "spec.cron: not a cron expression", "spec.cron")
    assert error.describe() == ("INVALID_ARGUMENT: spec.cron: not a cron expression "
                                "(field: spec.cron)")
    assert error.__cause__ is None and not isinstance(error, grpc.RpcError)


def test_an_error_without_details_or_field_still_reads_as_one_line() -> None:
    bare = api_error(Refusal(grpc.StatusCode.UNAVAILABLE, None, [("cronlog-field", b"x")]))
    assert (bare.message, bare.field) == ("", "x")
    assert bare.describe() == "UNAVAILABLE: no details (field: x)"
    several = api_error(Refusal(grpc.StatusCode.INVALID_ARGUMENT, "two",
                                [("cronlog-field", "a"), ("cronlog-field", "b")]))
    assert several.field == "a, b"
    assert "\x1b" not in api_error(Refusal(grpc.StatusCode.INTERNAL, "\x1b[2J")).describe()
    assert api_error(grpc.RpcError()).code == grpc.StatusCode.UNKNOWN


def test_every_call_carries_the_token_and_the_deadline_of_its_kind() -> None:
    get = Rpc(lambda request: pb.GetJobResponse(job=pb.Job(job_id=request.job_id)))
    pause = Rpc(lambda request: pb.PauseJobResponse(job=pb.Job(job_id=request.job_id)))
    backfill = Rpc(lambda request: pb.BackfillJobResponse(run_ids=["r1"]))
    client = client_of("s3cret", GetJob=get, PauseJob=pause, BackfillJob=backfill)
    assert client.get_job("j").job_id == "j"
    assert client.pause_job("j").job_id == "j"
    assert client.backfill_job("j", datetime(2026, 1, 1, tzinfo=UTC),
                               datetime(2026, 1, 2, tzinfo=UTC)) == ["r1"]
    bearer = (("authorization", "Bearer s3cret"),)
    assert [(c[1], c[2]) for c in get.calls + pause.calls + backfill.calls] == [
        (1.0, bearer), (2.0, bearer), (3.0, bearer)]
    anonymous = client.with_options(token=None, timeouts=Timeouts(read=0.5))
    anonymous.get_job("j")
    assert get.calls[-1][1:] == (0.5, ())
    assert client.with_options(token="other").timeouts == client.timeouts


def test_a_change_gets_a_new_request_id_unless_given_one() -> None:
    pause = Rpc(lambda request: pb.PauseJobResponse())
    client = client_of(PauseJob=pause)
    client.pause_job("j")
    client.pause_job("j")
    client.pause_job("j", request_id="mine")
    first, second, given = (call[0].request_id for call in pause.calls)
    assert first and second and first != second
    assert given == "mine"


def test_a_call_the_api_did_not_take_is_made_again_with_the_same_request_id() -> None:
    down = Refusal(grpc.StatusCode.UNAVAILABLE, "connection refused")
    answers = iter([down, down, pb.PauseJobResponse(job=pb.Job(job_id="j"))])

    def flaky(request: Any) -> Any:
        answer = next(answers)
        if isinstance(answer, Refusal):
            raise answer
        return answer

    pause = Rpc(flaky)
    client = CronlogClient(stub=Stub(PauseJob=pause),  # type: ignore[arg-type]
                           retries=Retries(attempts=3, backoff=0.001))
    assert client.pause_job("j").job_id == "j"
    ids = {call[0].request_id for call in pause.calls}
    assert len(pause.calls) == 3 and len(ids) == 1, "three tries of one request"
    always_down = Rpc(refuse(down))
    with pytest.raises(ApiError) as raised:
        CronlogClient(stub=Stub(GetJob=always_down),  # type: ignore[arg-type]
                      retries=Retries(attempts=2, backoff=0.001)).get_job("j")
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE and len(always_down.calls) == 2
    refused = Rpc(refuse(Refusal(grpc.StatusCode.NOT_FOUND, "no such job")))
    with pytest.raises(ApiError):
        client_of(GetJob=refused).get_job("j")
    assert len(refused.calls) == 1, "a refusal is an answer: not made again"


def test_all_jobs_follows_the_page_tokens_with_the_same_filters() -> None:
    pages = {"": (["a", "b"], "t1"), "t1": (["c"], "t2"), "t2": ([], "")}

    def answer(request: pb.ListJobsRequest) -> pb.ListJobsResponse:
        ids, token = pages[request.page_token]
        return pb.ListJobsResponse(jobs=[pb.Job(job_id=i) for i in ids],
                                   next_page_token=token)

    rpc = Rpc(answer)
    query = pb.ListJobsRequest(queue="q", page_size=2)
    assert [job.job_id for job in client_of(ListJobs=rpc).all_jobs(query)] == ["a", "b", "c"]
    assert [(c[0].queue, c[0].page_size, c[0].page_token) for c in rpc.calls] == [
        ("q", 2, ""), ("q", 2, "t1"), ("q", 2, "t2")]
    assert query.page_token == "", "the caller's query is not changed"
    page = client_of(ListJobs=rpc).list_jobs(pb.ListJobsRequest(page_token="t1"))
    assert page == Page((pb.Job(job_id="c"),), "t2")


def test_paging_asks_for_a_page_only_when_the_items_before_it_are_taken() -> None:
    asked: list[str] = []

    def fetch(token: str) -> Page[int]:
        asked.append(token)
        return Page((len(asked),), f"t{len(asked)}")

    items = every_item(fetch)
    assert next(items) == 1 and asked == [""]
    assert next(items) == 2 and asked == ["", "t1"]
    assert list(every_item(fetch, most_pages=3)) == [3, 4, 5]


def test_a_client_made_by_connect_closes_its_channel_and_a_view_does_not() -> None:
    with connect("127.0.0.1:1", token="t", timeouts=Timeouts(read=0.2)) as client:
        view = client.with_options(token=None)
        view.close()
        # Still open: nobody answers there, and grpc's own error arrives as ApiError.
        with pytest.raises(ApiError) as raised:
            client.get_job("j")
        assert raised.value.code in (grpc.StatusCode.UNAVAILABLE,
                                     grpc.StatusCode.DEADLINE_EXCEEDED)
    with pytest.raises(ValueError, match="closed channel"):
        client.get_job("j")
