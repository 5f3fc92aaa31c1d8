"""An owner reads the jobs and stored requests of a cycle's commands at once: a CreateJobs
batch brings hundreds of creates, and two Postgres round trips each made owners the
bottleneck of bulk creation (docs/bulk-import.md). The answers stay those of one by one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from uuid import UUID

from cronlog.commands.owner.ports import StoredRequest
from cronlog.domain.job import Job
from tests.support.clock import FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import SPEC, create_message
from tests.support.owner_store import RequestStore
from tests.support.owner_transport import FakeTransport


@dataclass
class CountingStore(RequestStore):
    reads: dict[str, int] = field(default_factory=dict)

    def _count(self, what: str) -> None:
        self.reads[what] = self.reads.get(what, 0) + 1

    def job(self, job_id: UUID) -> Job | None:
        self._count("job")
        return super().job(job_id)

    def request(self, job_id: UUID, request_id: str) -> StoredRequest | None:
        self._count("request")
        return super().request(job_id, request_id)

    def load_jobs(self, job_ids: Sequence[UUID]) -> list[Job]:
        self._count("load_jobs")
        return super().load_jobs(job_ids)

    def requests(self, keys: Sequence[tuple[UUID, str]]
                 ) -> dict[tuple[UUID, str], StoredRequest]:
        self._count("requests")
        return {key: found for key in keys
                if (found := RequestStore.request(self, *key)) is not None}


# Fires in no cycle of these tests: the transactions hold only what the commands wrote.
YEARLY = replace(SPEC, cron="0 0 1 1 *", time_zone="UTC")


def replies(transport: FakeTransport) -> list[dict[str, Any]]:
    return [dict(o.record) for o in transport.transactions[-1] if o.name == "CommandReply"]


def test_a_cycle_of_creates_reads_jobs_and_requests_once_and_answers_each() -> None:
    store, transport = CountingStore(replays=True), FakeTransport()
    owner = make_owner(store, transport, FakeClock())
    creates = [create_message(YEARLY, request_id=f"bulk-{n}") for n in range(50)]
    transport.inbox += creates
    owner.cycle()
    assert store.reads.get("job", 0) == 0 and store.reads.get("request", 0) == 0
    assert store.reads["load_jobs"] == 1 and store.reads["requests"] == 1
    answered = replies(transport)
    assert len(answered) == 50 and all(r["ok"] and r["job_version"] == 1 for r in answered)
    assert sum(o.name == "JobCreated" for o in transport.transactions[-1]) == 50


def test_the_same_batch_again_is_answered_from_the_requests_read_at_once() -> None:
    store, transport = CountingStore(replays=True), FakeTransport()
    owner = make_owner(store, transport, FakeClock())
    creates = [create_message(YEARLY, request_id=f"bulk-{n}") for n in range(20)]
    transport.inbox += creates
    owner.cycle()
    store.reads.clear()
    transport.inbox += [create_message(YEARLY, request_id=f"bulk-{n}") for n in range(20)]
    owner.cycle()
    assert [o.name for o in transport.transactions[-1]] == ["CommandReply"] * 20
    assert all(r["ok"] and r["job_version"] == 1 for r in replies(transport))
    assert store.reads.get("request", 0) == 0 and store.reads["requests"] == 1


@dataclass
class OneBadRow(CountingStore):
    """A store with one job whose row does not load (a corrupt spec)."""

    bad: UUID | None = None

    def job(self, job_id: UUID) -> Job | None:
        if job_id == self.bad:
            raise ValueError("the stored spec does not decode")
        return super().job(job_id)

    def load_jobs(self, job_ids: Sequence[UUID]) -> list[Job]:
        if self.bad in job_ids:
            raise ValueError("the stored spec does not decode")
        return super().load_jobs(job_ids)


def test_a_row_that_does_not_load_fails_only_its_own_command() -> None:
    creates = [create_message(YEARLY, request_id=f"bulk-{n}") for n in range(5)]
    store, transport = OneBadRow(replays=True), FakeTransport()
    store.bad = UUID(str(creates[2].record["job_id"]))
    owner = make_owner(store, transport, FakeClock())
    transport.inbox += creates
    owner.cycle()
    answered = {r["request_id"]: r for r in replies(transport)}
    assert [answered[f"bulk-{n}"]["ok"] for n in range(5)] == [True, True, False, True, True]
    assert store.reads["job"] >= 5, "read one by one, as without the prefetch"
