"""JobApi with `after` and `cascade`: a refused upstream sends nothing; cascade reaches the
command record as given."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest

from cronlog.commands.api.job_api import CommandRejected, JobApi
from cronlog.commands.messages import CommandMessage
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.domain.catalogue import Command
from cronlog.domain.dependency import Dependency
from cronlog.domain.dependency_graph import DependencyCycle
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.ids import job_id_for_request
from cronlog.domain.spec import JobSpec
from tests.support.clock import FakeClock

NOW = datetime(2026, 1, 1, tzinfo=UTC)
UPSTREAM = uuid4()
DEPENDENT = JobSpec(name="n", tenant="acme", queue="default", handler="echo",
                    after=Dependency((UPSTREAM,)))


@dataclass
class RecordingBus:
    sent: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    # Jobs the owner has (been sent) so far.
    existing: set[UUID] = field(default_factory=set)

    def send(self, command: CommandMessage, timeout: float) -> Mapping[str, Any]:
        self.sent.append((command.NAME, command.record()))
        self.existing.add(UUID(command.key))
        return {"ok": True, "job_version": 1}


@dataclass
class Row:
    version: int = 1
    status: str = "active"


class Jobs:
    """Every job exists; the tenant graph is `after`: job -> (tenant, its upstreams)."""

    def __init__(self, after: dict[UUID, tuple[str, tuple[UUID, ...]]],
                 existing: set[UUID]) -> None:
        self.after = after
        self.existing = existing

    def get(self, job_id: UUID) -> Any:
        return Row() if job_id in self.existing or job_id in self.after else None

    def run(self, run_id: UUID) -> Any:
        return None

    def count_jobs(self, tenant: str) -> int:
        return 0

    def upstreams(self, tenant: str,
                  job_ids: Collection[UUID]) -> Mapping[UUID, tuple[UUID, ...]]:
        return {j: self.after[j][1] for j in job_ids
                if j in self.after and self.after[j][0] == tenant}


class Records:
    def to_record(self, spec: JobSpec) -> dict[str, Any]:
        return {}


def api(bus: RecordingBus, graph: dict[UUID, tuple[str, tuple[UUID, ...]]],
        with_reader: bool = True) -> JobApi:
    jobs = Jobs(graph, bus.existing)
    return JobApi(bus=bus, jobs=jobs, queues=DeclaredQueues.of(("default",)), specs=Records(),
                  clock=FakeClock(NOW), read_your_write_timeout=0.0,
                  upstreams=jobs if with_reader else None)


def test_a_dependent_of_an_existing_upstream_is_sent() -> None:
    bus = RecordingBus()
    api(bus, {UPSTREAM: ("acme", ())}).create_job("r1", DEPENDENT)
    assert [name for name, _ in bus.sent] == [Command.CREATE_JOB]


@pytest.mark.parametrize("graph", [{}, {UPSTREAM: ("other", ())}])
def test_an_unknown_upstream_or_another_tenants_is_refused_unsent(
        graph: dict[UUID, tuple[str, tuple[UUID, ...]]]) -> None:
    bus = RecordingBus()
    with pytest.raises(InvalidSpec) as created:
        api(bus, graph).create_job("r1", DEPENDENT)
    with pytest.raises(InvalidSpec) as updated:
        api(bus, graph).update_job("r2", uuid4(), 1, DEPENDENT)
    assert str(created.value) == str(updated.value) == (
        f"spec.after.job_ids: job {UPSTREAM} not found")
    assert bus.sent == []


def test_a_create_naming_its_own_future_id_is_refused() -> None:
    bus = RecordingBus()
    own = job_id_for_request("acme", "r1")
    spec = replace(DEPENDENT, after=Dependency((own,)))
    with pytest.raises(InvalidSpec, match="itself"):
        api(bus, {}).create_job("r1", spec)
    assert bus.sent == []


def test_an_update_closing_a_cycle_is_refused_unsent() -> None:
    bus = RecordingBus()
    me = uuid4()
    with pytest.raises(DependencyCycle):
        api(bus, {UPSTREAM: ("acme", (me,))}).update_job("r1", me, 1, DEPENDENT)
    assert bus.sent == []


def test_without_a_reader_after_is_refused_never_sent_unchecked() -> None:
    bus = RecordingBus()
    with pytest.raises(CommandRejected) as refused:
        api(bus, {UPSTREAM: ("acme", ())}, with_reader=False).create_job("r1", DEPENDENT)
    assert (refused.value.status, refused.value.field) == ("UNAVAILABLE", "spec.after")
    assert bus.sent == []


def test_a_retried_create_gets_the_owners_first_outcome_unchecked() -> None:
    """Upstreams deleted since the first create must not turn its retry into a refusal."""
    bus = RecordingBus()
    graph: dict[UUID, tuple[str, tuple[UUID, ...]]] = {UPSTREAM: ("acme", ())}
    api(bus, graph).create_job("r1", DEPENDENT)
    del graph[UPSTREAM]
    api(bus, graph).create_job("r1", DEPENDENT)
    assert [name for name, _ in bus.sent] == [Command.CREATE_JOB] * 2


@pytest.mark.parametrize("cascade", [True, False])
def test_trigger_carries_cascade(cascade: bool) -> None:
    bus = RecordingBus()
    api(bus, {}).trigger_job("r1", UPSTREAM, cascade)
    assert bus.sent[0][0] == Command.TRIGGER_JOB and bus.sent[0][1]["cascade"] is cascade
