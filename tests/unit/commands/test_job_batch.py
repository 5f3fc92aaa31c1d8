"""JobBatch: each item checked as CreateJob checks it, all good items sent in one go, each
item's outcome its own."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest

from cronlog.commands.api.job_api import CommandRejected, JobApi
from cronlog.commands.api.job_batch import (
    BatchItem,
    ItemCreated,
    JobBatch,
    OneByOne,
    batch_bus,
)
from cronlog.commands.messages import CommandMessage, PauseJob
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.domain.catalogue import Command
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.ids import job_id_for_request
from cronlog.domain.limits import TenantLimit, TenantLimitReached, TenantLimits
from cronlog.domain.spec import JobSpec
from tests.support.clock import FakeClock

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SPEC = JobSpec(name="n", tenant="acme", queue="default", handler="echo", cron="0 * * * *")


@dataclass
class BatchBus:
    """Answers every command OK unless told otherwise; remembers each send_many call."""

    # Each call's commands as (key, name, record, request id).
    calls: list[list[tuple[str, str, Mapping[str, Any], str]]] = field(default_factory=list)
    answers: dict[str, Mapping[str, Any] | Exception] = field(default_factory=dict)

    def send_many(self, commands: Sequence[CommandMessage],
                  timeout: float) -> list[Mapping[str, Any] | Exception]:
        self.calls.append([(c.key, c.NAME, c.record(), c.request_id) for c in commands])
        return [self.answers.get(c.request_id, {"ok": True, "job_version": 1})
                for c in commands]

    def send(self, command: CommandMessage, timeout: float) -> Mapping[str, Any]:
        raise AssertionError("a batch is sent with send_many")


class Jobs:
    def __init__(self, counts: Mapping[str, int] | None = None,
                 existing: Collection[UUID] = ()) -> None:
        self.counts = dict(counts or {})
        self.ids = set(existing)
        self.existing_calls = 0

    def get(self, job_id: UUID) -> Any:
        raise AssertionError("a batch reads which jobs exist at once")

    def run(self, run_id: UUID) -> Any:
        return None

    def count_jobs(self, tenant: str) -> int:
        return self.counts.get(tenant, 0)

    def existing(self, job_ids: Collection[UUID]) -> set[UUID]:
        self.existing_calls += 1
        return self.ids & set(job_ids)


class Records:
    def to_record(self, spec: JobSpec) -> dict[str, Any]:
        return {"name": spec.name}


def batch(bus: BatchBus, jobs: Jobs, limits: TenantLimits | None = None) -> JobBatch:
    api = JobApi(bus=bus, jobs=jobs, queues=DeclaredQueues.of(["default"]), specs=Records(),
                 clock=FakeClock(NOW), limits=limits or TenantLimits())
    return JobBatch(api, bus, jobs)


def item(request_id: str, **changes: Any) -> BatchItem:
    values = {**SPEC.__dict__, **changes}
    return BatchItem(request_id, JobSpec(**values))


def test_good_items_go_in_one_call_and_bad_ones_fail_alone_sending_nothing() -> None:
    bus, jobs = BatchBus(), Jobs()
    outcomes = batch(bus, jobs).create_jobs([
        item("a"), item("b", cron="61 * * * *"), item(""), item("c", queue="nowhere"),
        item("d")])
    assert len(bus.calls) == 1 and jobs.existing_calls == 1
    assert [request_id for *_, request_id in bus.calls[0]] == ["a", "d"]
    assert all(name == Command.CREATE_JOB for _, name, _, _ in bus.calls[0])
    assert outcomes[0] == ItemCreated(job_id_for_request("acme", "a"), 1, False)
    assert [getattr(o, "field", None) for o in outcomes[1:4]] == [
        "spec.schedule.cron", "request_id", "spec.queue"]
    assert all(isinstance(o, InvalidSpec) for o in outcomes[1:4])
    assert isinstance(outcomes[4], ItemCreated)


def test_a_command_carries_what_create_job_sends() -> None:
    bus = BatchBus()
    batch(bus, Jobs()).create_jobs([item("a")])
    key, _, record, _ = bus.calls[0][0]
    job_id = job_id_for_request("acme", "a")
    assert key == str(job_id)
    assert record == {"request_id": "a", "job_id": str(job_id), "at": NOW,
                      "correlation_id": None, "spec": {"name": "n"},
                      "calendar_version": 0, "calendar_exclusions": []}


def test_retries_and_repeats_within_the_batch_are_marked_as_existing() -> None:
    existed = job_id_for_request("acme", "old")
    outcomes = batch(BatchBus(), Jobs(existing={existed})).create_jobs(
        [item("old"), item("new"), item("new")])
    assert [o.already_existed for o in outcomes if isinstance(o, ItemCreated)] == [
        True, False, True]


def test_a_retry_the_owner_says_it_answered_before_is_marked_as_existing() -> None:
    """A batch sent again right after the first: the api's read of Postgres may come before
    the owner applied the first creates; the owner's reply says they repeat."""
    bus = BatchBus(answers={"again": {"ok": True, "job_version": 1, "repeated": True}})
    outcomes = batch(bus, Jobs()).create_jobs([item("again"), item("first")])
    assert [o.already_existed for o in outcomes if isinstance(o, ItemCreated)] == [
        True, False]


def test_the_tenant_limit_counts_the_batchs_own_new_jobs() -> None:
    limits = TenantLimits(default=TenantLimit(max_jobs=3))
    existed = job_id_for_request("acme", "old")
    outcomes = batch(BatchBus(), Jobs(counts={"acme": 1}, existing={existed}), limits
                     ).create_jobs([item("old"), item("x"), item("y"), item("z"),
                                    item("w", tenant="beta")])
    kinds = [type(o).__name__ for o in outcomes]
    # 1 job + x + y reach the limit of 3; a retry of an existing job does not count.
    assert kinds == ["ItemCreated", "ItemCreated", "ItemCreated", "TenantLimitReached",
                     "ItemCreated"]
    assert isinstance(outcomes[3], TenantLimitReached)


def test_the_owners_refusal_and_the_transports_error_are_the_items_own() -> None:
    bus = BatchBus(answers={
        "reused": {"ok": False, "error_code": "INVALID_ARGUMENT", "error_message": "reused",
                   "error_field": "request_id"},
        "lost": TimeoutError("no reply")})
    outcomes = batch(bus, Jobs()).create_jobs([item("reused"), item("lost"), item("fine")])
    refused = outcomes[0]
    assert isinstance(refused, CommandRejected)
    assert (refused.status, refused.field) == ("INVALID_ARGUMENT", "request_id")
    assert isinstance(outcomes[1], TimeoutError)
    assert isinstance(outcomes[2], ItemCreated)


def test_an_empty_or_all_bad_batch_sends_nothing() -> None:
    bus = BatchBus()
    assert batch(bus, Jobs()).create_jobs([]) == []
    batch(bus, Jobs()).create_jobs([item("")])
    assert bus.calls == []


@dataclass
class OneAtATime:
    sent: list[str] = field(default_factory=list)

    def send(self, command: CommandMessage, timeout: float) -> Mapping[str, Any]:
        if command.request_id == "down":
            raise ConnectionError("inbox down")
        self.sent.append(command.request_id)
        return {"ok": True, "job_version": 2}


def test_a_bus_without_batches_is_sent_one_by_one_each_failing_alone() -> None:
    plain = OneAtATime()
    bus = batch_bus(plain)
    assert isinstance(bus, OneByOne)
    replies = bus.send_many([PauseJob(request_id=r, job_id=uuid4(), at=datetime.now(UTC))
                             for r in ("a", "down", "b")], 1.0)
    assert plain.sent == ["a", "b"]
    assert isinstance(replies[1], ConnectionError) and replies[2] == {"ok": True,
                                                                      "job_version": 2}
    batching = BatchBus()
    assert batch_bus(batching) is batching


@pytest.mark.parametrize("request_id", ["x" * 201])
def test_request_ids_keep_create_jobs_bounds(request_id: str) -> None:
    outcomes = batch(BatchBus(), Jobs()).create_jobs([item(request_id)])
    assert isinstance(outcomes[0], InvalidSpec) and outcomes[0].field == "request_id"


def test_a_large_batch_goes_in_waves_one_at_a_time_per_tenant() -> None:
    """At most WAVE of a tenant's commands wait on owners at once, whatever batches it
    sends in parallel: a command of another tenant sent meanwhile is never behind more."""
    import threading

    from cronlog.commands.api.job_batch import WAVE, TenantTurns

    waiting = 0
    most = 0
    lock = threading.Lock()

    class SlowBus(BatchBus):
        def send_many(self, commands: Sequence[CommandMessage],
                      timeout: float) -> list[Mapping[str, Any] | Exception]:
            nonlocal waiting, most
            with lock:
                waiting += len(commands)
                most = max(most, waiting)
            threading.Event().wait(0.01)  # the owners' round trip
            with lock:
                waiting -= len(commands)
            return super().send_many(commands, timeout)

    bus, jobs, turns = SlowBus(), Jobs(), TenantTurns()

    def one_batch(name: str, count: int) -> list[Any]:
        api = batch(bus, jobs).api
        return JobBatch(api, bus, jobs, turns).create_jobs(
            [item(f"{name}-{n}") for n in range(count)])

    first = one_batch("solo", 2 * WAVE + 22)
    assert [len(c) for c in bus.calls] == [WAVE, WAVE, 22]
    assert all(isinstance(o, ItemCreated) for o in first)
    bus.calls.clear()
    most = 0
    results: list[list[Any]] = []
    # Four batches of more than half a wave each: sent at once, more than a wave would wait.
    threads = [threading.Thread(target=lambda n=n: results.append(
        one_batch(f"p{n}", WAVE // 2 + 10))) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4 and all(isinstance(o, ItemCreated) for r in results for o in r)
    assert most <= WAVE, f"{most} of one tenant's commands waited at once"


def test_items_the_deadline_leaves_unsent_fail_alone() -> None:
    from cronlog.commands.api.job_batch import ItemNotSent, TenantTurns

    bus, jobs, turns = BatchBus(), Jobs(), TenantTurns()
    api = batch(bus, jobs).api
    api.reply_timeout = 0.5
    turn = turns.of(SPEC.tenant)
    turn.acquire()  # another batch of the tenant holds its turn past the deadline
    try:
        outcomes = JobBatch(api, bus, jobs, turns).create_jobs([item("late")])
    finally:
        turn.release()
    assert isinstance(outcomes[0], ItemNotSent) and bus.calls == []
    assert outcomes[0].status == "UNAVAILABLE"


@pytest.mark.parametrize(("partitions", "wave"), [(1, 32), (4, 128), (8, 256), (31, 992),
                                                  (64, 1000), (1024, 1000)])
def test_a_wave_is_a_few_commands_per_inbox_partition_and_at_most_a_batch(
        partitions: int, wave: int) -> None:
    from cronlog.commands.api.job_batch import wave_for

    assert wave_for(partitions) == wave
