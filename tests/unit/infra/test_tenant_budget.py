"""The api's per-tenant budget (issue 33, item 3): token buckets on a fake clock, the bucket
map's bound, the share of the server's threads, what each call costs, and the interceptor's
RESOURCE_EXHAUSTED with retry-after, never reaching the servicer."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import grpc
import pytest

from cronlog.infra.grpc import auth
from cronlog.infra.grpc.budget_interceptor import TenantBudget, TenantBudgetInterceptor
from cronlog.infra.grpc.tenant_budget import (
    COMMAND_RATE,
    HEAVY_SHARE,
    PROOF_READS,
    READ_RATE,
    REASONS,
    TENANT_SHARE,
    Charge,
    TenantBuckets,
    TenantShare,
    TokenBucket,
    charge_of,
    is_heavy,
    read_bytes_charge,
    requested_tenant,
    retry_after,
)
from cronlog.infra.observability.api import ApiObservation
from cronlog.v1 import job_service_pb2 as pb
from tests.support.clock import FakeClock


def test_a_bucket_starts_full_refills_at_its_rate_and_never_beyond_its_burst() -> None:
    bucket = TokenBucket(rate=2.0, burst=4, now=0.0)
    assert [bucket.take(1, 0.0) for _ in range(4)] == [0.0] * 4
    assert bucket.take(1, 0.0) == pytest.approx(0.5)  # one token at 2 a second
    assert bucket.take(1, 0.25) == pytest.approx(0.25)  # half a token came, nothing taken
    assert bucket.take(1, 0.5) == 0.0
    assert bucket.take(1, 100.0) == 0.0 and bucket.tokens == pytest.approx(3.0)  # capped


def test_a_cost_above_the_burst_needs_a_full_bucket_and_empties_it() -> None:
    bucket = TokenBucket(rate=10.0, burst=100, now=0.0)
    assert bucket.take(1000, 0.0) == 0.0 and bucket.tokens == 0.0
    assert bucket.take(1000, 5.0) == pytest.approx(5.0)  # 50 of the 100 there
    assert bucket.take(1000, 10.0) == 0.0


def test_a_refused_take_leaves_the_tokens_for_a_smaller_one() -> None:
    bucket = TokenBucket(rate=1.0, burst=10, now=0.0)
    bucket.take(8, 0.0)
    assert bucket.take(5, 0.0) > 0 and bucket.take(2, 0.0) == 0.0


def test_each_tenant_has_its_own_bucket() -> None:
    clock = FakeClock(seconds=1000.0)
    buckets = TenantBuckets(rate=1.0, burst=2, clock=clock)
    assert buckets.take("a") == 0.0 and buckets.take("a") == 0.0
    assert buckets.take("a") == pytest.approx(1.0)
    assert buckets.take("b") == 0.0  # a's empty bucket is not b's
    clock.advance(1.0)
    assert buckets.take("a") == 0.0


def test_the_bucket_map_is_bounded_least_recently_used_first() -> None:
    clock = FakeClock(seconds=1000.0)
    buckets = TenantBuckets(rate=1.0, burst=1, clock=clock, most=3)
    for name in ("a", "b", "c"):
        buckets.take(name)
    buckets.take("a")  # a used last: b is the oldest now
    for n in range(1000):
        buckets.take(f"made-up-{n}")
    assert len(buckets) == 3
    buckets = TenantBuckets(rate=1.0, burst=1, clock=clock, most=3)
    for name in ("a", "b", "c"):
        buckets.take(name)
    buckets.take("a")
    buckets.take("d")  # b forgotten, a kept (still empty)
    assert buckets.take("a") > 0
    assert buckets.take("b") == 0.0  # a forgotten tenant starts again full


def test_a_tenant_share_of_the_threads() -> None:
    share = TenantShare.of_threads(32, 0.5)
    assert share.most == 16
    assert all(share.enter("a") for _ in range(16))
    assert not share.enter("a")
    assert share.enter("b")  # another tenant's calls are not a's
    share.leave("a")
    assert share.enter("a") and share.running("a") == 16
    for _ in range(16):
        share.leave("a")
    assert share.running("a") == 0 and "a" not in share._running  # nothing kept for it
    assert TenantShare.of_threads(1, 0.5).most == 1  # at least one call


def test_what_each_call_costs() -> None:
    batch = pb.CreateJobsRequest(items=[pb.CreateJobRequest() for _ in range(250)])
    assert charge_of("CreateJobs", batch) == Charge(COMMAND_RATE, 250)
    assert charge_of("CreateJobs", pb.CreateJobsRequest()) == Charge(COMMAND_RATE, 1)
    assert charge_of("PauseJob", pb.PauseJobRequest()) == Charge(COMMAND_RATE, 1)
    for read in ("ListJobs", "ListRuns", "GetRun", "ListCalendars"):
        assert charge_of(read, None) == Charge(READ_RATE, 1)
    # A preview costs a read per 100 fire times it asks for (10 when it names none).
    assert [charge_of("PreviewSchedule", pb.PreviewScheduleRequest(count=n)).cost
            for n in (0, 10, 100, 101, 1000)] == [1, 1, 1, 2, 10]
    # One asking for more than a preview gives is refused by the servicer, not charged for
    # what it asked (2**31 - 1 was the tenant's reads for days, answered RESOURCE_EXHAUSTED).
    assert [charge_of("PreviewSchedule", pb.PreviewScheduleRequest(count=n)).cost
            for n in (1001, 2**31 - 1, -1)] == [10, 10, 1]
    assert charge_of("GetJob", pb.GetJobRequest()) == Charge(None)
    # A proof from the event log (issue 38) costs a default read burst, whatever it asks.
    for proof in ("VerifyHistory", "WhatIf"):
        assert charge_of(proof, None) == Charge(READ_RATE, PROOF_READS)
        assert is_heavy(proof, None), proof


def test_an_open_requests_tenant_is_what_it_names_cut_short() -> None:
    assert requested_tenant(pb.ListRunsRequest(tenant="acme")) == "acme"
    assert requested_tenant(pb.CreateJobRequest(spec=pb.JobSpec(tenant="beta"))) == "beta"
    assert requested_tenant(pb.CreateJobsRequest(items=[
        pb.CreateJobRequest(spec=pb.JobSpec(tenant="gamma"))])) == "gamma"
    assert requested_tenant(pb.PauseJobRequest(job_id="x")) == ""
    assert requested_tenant(pb.ListJobsRequest(tenant="x" * 10_000)) == "x" * 128


def test_retry_after_is_whole_seconds_at_least_one() -> None:
    assert [retry_after(s) for s in (0.001, 1.0, 1.2, 30.0)] == [1, 1, 2, 30]


class Aborted(Exception):
    pass


@dataclass
class FakeContext:
    trailing: tuple[tuple[str, str], ...] = ()
    code: grpc.StatusCode | None = None
    details: str = ""

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.trailing = metadata

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise Aborted(details)


@dataclass
class Servicer:
    calls: list[str] = field(default_factory=list)
    hold: threading.Event | None = None
    entered: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))

    def __call__(self, request: Any, context: Any) -> str:
        self.calls.append(type(request).__name__)
        self.entered.release()
        if self.hold is not None:
            self.hold.wait(10)
        return "answer"


SERVICE = "cronlog.v1.JobService"


def arriving(method: str) -> grpc.HandlerCallDetails:
    # grpcio's HandlerCallDetails is a protocol, which this meets; grpc-stubs has a class.
    return cast(grpc.HandlerCallDetails, SimpleNamespace(method=method, invocation_metadata=()))


def budgeted(servicer: Servicer, method: str, budget: TenantBudget,
             metrics: ApiObservation | None = None) -> Any:
    interceptor = TenantBudgetInterceptor(
        SERVICE, ("CreateJobs", "ListRuns", "GetJob", "PreviewSchedule", "ListJobs",
                  "TestChannel"), budget, metrics)
    handler = interceptor.intercept_service(
        lambda _details: grpc.unary_unary_rpc_method_handler(servicer),
        arriving(f"/{SERVICE}/{method}"))
    assert handler is not None
    return handler.unary_unary


def call_as(tenant: str | None, behavior: Any, request: Any) -> tuple[Any, FakeContext]:
    context = FakeContext()
    token = auth._caller.set(tenant)
    try:
        return behavior(request, context), context
    except Aborted:
        return None, context
    finally:
        auth._caller.reset(token)


def test_a_tenant_over_its_read_rate_is_refused_with_retry_after_and_others_are_not() -> None:
    clock = FakeClock(seconds=1000.0)
    observation = ApiObservation()
    budget = TenantBudget(100, 100, read_rate=0.5, read_burst=2, threads=4, share=0.5,
                          clock=clock)
    servicer = Servicer()
    behavior = budgeted(servicer, "ListRuns", budget, observation)
    request = pb.ListRunsRequest()
    assert [call_as("a", behavior, request)[0] for _ in range(2)] == ["answer", "answer"]
    answer, context = call_as("a", behavior, request)
    assert answer is None and context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(context.trailing) == {"retry-after": "2"}  # a token in 2 s at 0.5 a second
    assert "'a' is over its rate of reads" in context.details
    assert call_as("b", behavior, request)[0] == "answer"
    assert len(servicer.calls) == 3  # the refused call never reached the servicer
    clock.advance(2.0)
    assert call_as("a", behavior, request)[0] == "answer"
    assert observation.metrics.registry.get_sample_value(
        "cronlog_api_refusals_total", {"reason": READ_RATE}) == 1.0


def test_a_batch_costs_its_items_and_open_mode_keys_by_the_named_tenant() -> None:
    budget = TenantBudget(1.0, 100, 100, 100, threads=4, share=0.5, clock=FakeClock(seconds=1000.0))
    behavior = budgeted(Servicer(), "CreateJobs", budget)

    def batch(tenant: str, items: int) -> pb.CreateJobsRequest:
        return pb.CreateJobsRequest(items=[
            pb.CreateJobRequest(spec=pb.JobSpec(tenant=tenant)) for _ in range(items)])

    assert call_as(None, behavior, batch("acme", 60))[0] == "answer"
    answer, context = call_as(None, behavior, batch("acme", 60))
    assert answer is None and dict(context.trailing) == {"retry-after": "20"}
    assert call_as(None, behavior, batch("other", 60))[0] == "answer"


def test_cheap_reads_and_other_services_are_not_charged() -> None:
    budget = TenantBudget(1, 1, 1, 1, threads=4, share=0.5, clock=FakeClock(seconds=1000.0))
    behavior = budgeted(Servicer(), "GetJob", budget)
    assert all(call_as("a", behavior, pb.GetJobRequest())[0] == "answer" for _ in range(10))
    interceptor = TenantBudgetInterceptor(SERVICE, ("GetJob",), budget)
    health = grpc.unary_unary_rpc_method_handler(Servicer())
    assert interceptor.intercept_service(
        lambda _d: health, arriving("/grpc.health.v1.Health/Check")) is health


def test_a_tenant_holds_at_most_its_share_of_the_threads() -> None:
    observation = ApiObservation()
    budget = TenantBudget(100, 100, 100, 100, threads=4, share=0.5, clock=FakeClock(seconds=1000.0))
    hold = threading.Event()
    servicer = Servicer(hold=hold)
    behavior = budgeted(servicer, "GetJob", budget, observation)
    running = [threading.Thread(target=call_as, args=("a", behavior, pb.GetJobRequest()))
               for _ in range(2)]
    for thread in running:
        thread.start()
    for _ in running:
        assert servicer.entered.acquire(timeout=5)
    answer, context = call_as("a", behavior, pb.GetJobRequest())
    assert answer is None and context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(context.trailing) == {"retry-after": "1"}
    assert "share of the api's threads" in context.details
    other = threading.Thread(target=call_as, args=("b", behavior, pb.GetJobRequest()))
    other.start()
    assert servicer.entered.acquire(timeout=5)  # b runs beside a's two
    hold.set()
    for thread in (*running, other):
        thread.join(5)
    assert budget.share.running("a") == 0 and budget.share.running("b") == 0
    assert call_as("a", behavior, pb.GetJobRequest())[0] == "answer"
    assert observation.metrics.registry.get_sample_value(
        "cronlog_api_refusals_total", {"reason": TENANT_SHARE}) == 1.0


def test_previews_run_at_most_one_of_a_tenant_and_four_in_all() -> None:
    """A preview is the api's own CPU under its interpreter lock: one tenant's sixteen at once
    made another tenant's GetJob wait a second (the noisy-neighbour suite)."""
    observation = ApiObservation()
    budget = TenantBudget(100, 100, 100, 100, threads=32, share=0.5, clock=FakeClock(seconds=1000.0))
    hold = threading.Event()
    servicer = Servicer(hold=hold)
    preview = budgeted(servicer, "PreviewSchedule", budget, observation)
    get_job = budgeted(servicer, "GetJob", budget, observation)
    running = [threading.Thread(target=call_as, args=(t, preview, pb.PreviewScheduleRequest()))
               for t in ("a", "b", "c", "d")]
    running[0].start()
    assert servicer.entered.acquire(timeout=5)
    answer, context = call_as("a", preview, pb.PreviewScheduleRequest())
    assert answer is None and context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(context.trailing) == {"retry-after": "1"}
    assert "at most 4 PreviewSchedule calls at once, 1 of one tenant" in context.details
    for thread in running[1:]:  # b's, c's and d's beside a's
        thread.start()
    for _ in range(3):
        assert servicer.entered.acquire(timeout=5)
    answer, context = call_as("e", preview, pb.PreviewScheduleRequest())
    assert answer is None and "(4 running)" in context.details
    # Other calls are not heavy: a's GetJob runs beside its preview.
    getter = threading.Thread(target=call_as, args=("a", get_job, pb.GetJobRequest()))
    getter.start()
    assert servicer.entered.acquire(timeout=5)
    hold.set()
    for thread in (*running, getter):
        thread.join(5)
    assert budget.heavy.running == 0 and budget.heavy.tenants.running("a") == 0
    assert call_as("e", preview, pb.PreviewScheduleRequest())[0] == "answer"
    assert observation.metrics.registry.get_sample_value(
        "cronlog_api_refusals_total", {"reason": HEAVY_SHARE}) == 2.0


def test_a_bucket_owes_what_a_read_cost_after_it() -> None:
    """Every call owed counts: eight fat pages that passed at once owe all eight (a floor
    at minus the burst forgave most of them, and the tenant read twice its rate)."""
    bucket = TokenBucket(rate=10, burst=20, now=0.0)
    bucket.owe(25, 0.0)
    assert bucket.tokens == -5
    assert bucket.take(1, 0.0) == pytest.approx(0.6)  # the debt and the token, at 10 a second
    bucket.owe(8 * 192, 0.0)
    assert bucket.tokens == -5 - 8 * 192
    assert bucket.take(1, 1.0) == pytest.approx((5 + 8 * 192 + 1 - 10) / 10)


def test_a_read_is_charged_its_answers_bytes_after_it() -> None:
    """A fat page (3 MiB of jobs with 256 KiB payloads) costs a read per 16 KiB more, so
    parallel pages of fat rows are refused long before they take the api's CPU."""
    clock = FakeClock(seconds=1000.0)
    budget = TenantBudget(100, 100, read_rate=40, read_burst=400, threads=4, share=0.5,
                          clock=clock)
    fat = pb.ListJobsResponse(jobs=[pb.Job(spec=pb.JobSpec(payload=b"x" * 256 * 1024))
                                    for _ in range(12)])
    thin = pb.ListJobsResponse(jobs=[pb.Job(spec=pb.JobSpec(name="j")) for _ in range(50)])
    assert read_bytes_charge(fat) == 192 and read_bytes_charge(thin) == 0
    interceptor = TenantBudgetInterceptor(SERVICE, ("ListJobs",), budget)

    def listing(answer: pb.ListJobsResponse) -> Any:
        handler = interceptor.intercept_service(
            lambda _details: grpc.unary_unary_rpc_method_handler(lambda _r, _c: answer),
            arriving(f"/{SERVICE}/ListJobs"))
        assert handler is not None
        return handler.unary_unary

    fat_list, thin_list = listing(fat), listing(thin)
    assert call_as("a", fat_list, pb.ListJobsRequest())[0] is fat  # 1 + 192 of 400
    assert call_as("a", fat_list, pb.ListJobsRequest())[0] is fat  # 386 of 400
    assert call_as("a", fat_list, pb.ListJobsRequest())[0] is fat  # into debt: 14 - 193
    answer, context = call_as("a", thin_list, pb.ListJobsRequest())
    assert answer is None and dict(context.trailing) == {"retry-after": "5"}
    assert call_as("b", thin_list, pb.ListJobsRequest())[0] is thin  # b's bucket is its own
    clock.advance(5.0)
    assert call_as("a", thin_list, pb.ListJobsRequest())[0] is thin


def test_the_refusal_metric_takes_only_its_reasons() -> None:
    observation = ApiObservation()
    observation.request_refused("anything a caller might make up")
    assert all(observation.metrics.registry.get_sample_value(
        "cronlog_api_refusals_total", {"reason": r}) == 0.0 for r in REASONS)


def test_every_jobservice_method_has_its_cost_named_once() -> None:
    from cronlog.infra.grpc.tenant_budget import CHEAP, COMMANDS, READS, SENDS

    methods = {m.name for m in pb.DESCRIPTOR.services_by_name["JobService"].methods}
    assert methods == COMMANDS | READS | CHEAP | SENDS
    assert len(COMMANDS) + len(READS) + len(CHEAP) + len(SENDS) == len(methods)


def test_a_tenants_pages_of_over_a_hundred_jobs_run_one_at_a_time() -> None:
    """Eight pages of 1,000 fat rows at once kept another tenant's calls waiting 0.5-1 s on a
    slow machine: a long page is heavy, a page of at most 100 rows is not."""
    budget = TenantBudget(100, 100, 100, 100, threads=32, share=0.5, clock=FakeClock(seconds=1000.0))
    hold = threading.Event()
    servicer = Servicer(hold=hold)
    list_jobs = budgeted(servicer, "ListJobs", budget)
    long_page = threading.Thread(target=call_as, args=(
        "b", list_jobs, pb.ListJobsRequest(page_size=1000)))
    long_page.start()
    assert servicer.entered.acquire(timeout=5)
    answer, context = call_as("b", list_jobs, pb.ListJobsRequest(page_size=101))
    assert answer is None and context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "pages of more than 100 rows" in context.details and "1 of one tenant" in context.details
    # A page of 100 rows, and another tenant's long page, run beside it.
    short_page = threading.Thread(target=call_as, args=(
        "b", list_jobs, pb.ListJobsRequest(page_size=100)))
    other = threading.Thread(target=call_as, args=(
        "c", list_jobs, pb.ListJobsRequest(page_size=1000)))
    for thread in (short_page, other):
        thread.start()
        assert servicer.entered.acquire(timeout=5)
    hold.set()
    for thread in (long_page, short_page, other):
        thread.join(5)
    assert budget.heavy.running == 0

