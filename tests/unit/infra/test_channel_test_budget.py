"""TestChannel's share of the api (invariant 12, tenant_budget.SENDS): each call reaches a
tenant's receiver and holds a thread up to the sender's timeouts, so one tenant runs at
most one at once and starts at most SENDS_PER_MINUTE a minute; the api runs at most
SEND_CALLS in all; previews are not held up by them, nor they by previews."""

from __future__ import annotations

import threading

import grpc

from cronlog.infra.grpc.budget_interceptor import TenantBudget
from cronlog.infra.grpc.tenant_budget import (
    SEND_BURST,
    SEND_CALLS,
    SEND_RATE,
    SEND_SHARE,
    SENDS_PER_MINUTE,
    Charge,
    charge_of,
)
from cronlog.infra.observability.api import ApiObservation
from cronlog.v1 import job_service_pb2 as pb
from tests.support.clock import FakeClock
from tests.unit.infra.test_tenant_budget import Servicer, budgeted, call_as


def refusals(observation: ApiObservation, reason: str) -> float | None:
    return observation.metrics.registry.get_sample_value(
        "cronlog_api_refusals_total", {"reason": reason})


def test_a_channel_test_is_charged_as_a_send() -> None:
    assert charge_of("TestChannel", pb.TestChannelRequest()) == Charge(SEND_RATE)


def test_a_tenant_runs_one_channel_test_at_once_and_the_api_a_few() -> None:
    observation = ApiObservation()
    budget = TenantBudget(100, 100, 100, 100, threads=64, share=0.5,
                          clock=FakeClock(seconds=1000.0))
    hold = threading.Event()
    servicer = Servicer(hold=hold)
    test = budgeted(servicer, "TestChannel", budget, observation)
    preview = budgeted(servicer, "PreviewSchedule", budget, observation)
    running = [threading.Thread(target=call_as, args=(f"t{i}", test, pb.TestChannelRequest()))
               for i in range(SEND_CALLS)]
    for thread in running:
        thread.start()
    for _ in running:
        assert servicer.entered.acquire(timeout=5)
    answer, context = call_as("t0", test, pb.TestChannelRequest())
    assert answer is None and context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(context.trailing) == {"retry-after": "1"}
    assert f"at most {SEND_CALLS} TestChannel calls at once, 1 of one tenant" in context.details
    answer, context = call_as("other", test, pb.TestChannelRequest())
    assert answer is None and f"({SEND_CALLS} running)" in context.details
    # Previews have a gate of their own: eight slow receivers hold none of it.
    previewer = threading.Thread(target=call_as,
                                 args=("t0", preview, pb.PreviewScheduleRequest()))
    previewer.start()
    assert servicer.entered.acquire(timeout=5)
    hold.set()
    for thread in (*running, previewer):
        thread.join(5)
    assert budget.sends.running == 0 and budget.heavy.running == 0
    assert refusals(observation, SEND_SHARE) == 2.0


def test_a_tenant_starts_at_most_its_channel_tests_a_minute() -> None:
    observation = ApiObservation()
    clock = FakeClock(seconds=1000.0)
    budget = TenantBudget(100, 100, 100, 100, threads=64, share=0.5, clock=clock)
    test = budgeted(Servicer(), "TestChannel", budget, observation)
    for _ in range(SEND_BURST):
        assert call_as("a", test, pb.TestChannelRequest())[0] == "answer"
    answer, context = call_as("a", test, pb.TestChannelRequest())
    assert answer is None and context.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "over its rate of channel tests" in context.details
    assert dict(context.trailing) == {"retry-after": str(60 // SENDS_PER_MINUTE)}
    assert call_as("b", test, pb.TestChannelRequest())[0] == "answer"  # b's are its own
    clock.advance(60 / SENDS_PER_MINUTE)
    assert call_as("a", test, pb.TestChannelRequest())[0] == "answer"
    assert refusals(observation, SEND_RATE) == 1.0
