"""Queues and handlers are declared by the operator: a request naming anything else is
refused with the field named, and nothing reaches the inbox."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from cronlog.commands.api.job_api import JobApi
from cronlog.commands.messages import CommandMessage
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.spec import JobSpec
from tests.support.clock import FakeClock

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SPEC = JobSpec(name="n", tenant="acme", queue="default", handler="echo", cron="0 3 * * *")
CATALOG = DeclaredQueues.of(("default", "batch", "gpu"),
                            tenant_queues={"acme": ("default", "batch")},
                            tenant_handlers={"acme": ("echo",)})


def test_a_tenant_without_allow_lists_may_use_every_declared_queue_and_any_handler() -> None:
    for queue in ("default", "batch", "gpu"):
        CATALOG.check(replace(SPEC, tenant="other", queue=queue, handler="anything"))


def test_a_tenant_with_allow_lists_may_use_only_what_it_lists() -> None:
    CATALOG.check(replace(SPEC, queue="batch"))
    with pytest.raises(InvalidSpec) as queue_error:
        CATALOG.check(replace(SPEC, queue="gpu"))
    assert queue_error.value.field == "spec.queue"
    with pytest.raises(InvalidSpec) as handler_error:
        CATALOG.check(replace(SPEC, handler="http"))
    assert handler_error.value.field == "spec.handler"


def test_an_undeclared_queue_and_a_closed_one_get_the_same_answer_listing_nothing() -> None:
    answers = []
    for tenant, queue in (("other", "nope"), ("acme", "gpu")):
        with pytest.raises(InvalidSpec) as error:
            CATALOG.check(replace(SPEC, tenant=tenant, queue=queue))
        assert error.value.field == "spec.queue"
        answers.append(str(error.value).replace(repr(queue), "Q"))
        for other in ("default", "batch", "gpu") if queue == "nope" else ("default", "batch"):
            assert repr(other) not in str(error.value)
    assert answers[0] == answers[1]


@dataclass
class RecordingBus:
    sent: list[str] = field(default_factory=list)

    def send(self, command: CommandMessage, timeout: float) -> Mapping[str, Any]:
        self.sent.append(command.NAME)
        return {"ok": True, "job_version": 1}


@dataclass
class Row:
    version: int = 1
    status: str = "active"


class NoJobs:
    def get(self, job_id: UUID) -> Any:
        return Row()

    def run(self, run_id: UUID) -> Any:
        return None

    def count_jobs(self, tenant: str) -> int:
        return 0


class Records:
    def to_record(self, spec: JobSpec) -> dict[str, Any]:
        return {"queue": spec.queue}


def api(bus: RecordingBus) -> JobApi:
    return JobApi(bus=bus, jobs=NoJobs(), queues=CATALOG, specs=Records(), clock=FakeClock(NOW))


@pytest.mark.parametrize(("changes", "field_name"), [
    ({"queue": "made-up"}, "spec.queue"),
    ({"queue": "gpu"}, "spec.queue"),
    ({"handler": "http"}, "spec.handler"),
])
def test_create_and_update_refuse_before_anything_is_sent(changes: dict[str, Any],
                                                          field_name: str) -> None:
    bus = RecordingBus()
    spec = replace(SPEC, **changes)
    with pytest.raises(InvalidSpec) as created:
        api(bus).create_job("r1", spec)
    with pytest.raises(InvalidSpec) as updated:
        api(bus).update_job("r2", UUID(int=1), 1, spec)
    assert created.value.field == updated.value.field == field_name
    assert bus.sent == []


def test_a_declared_queue_goes_through() -> None:
    bus = RecordingBus()
    api(bus).create_job("r1", replace(SPEC, queue="batch"))
    assert bus.sent == ["CreateJob"]


# Issue 33, item 6: with tenant tokens, closed by default.
CLOSED = DeclaredQueues.of(("default", "batch", "gpu", "acme-private"),
                           tenant_queues={"acme": ("acme-private", "default")},
                           tenant_handlers={"acme": ("acme.reports:run", "echo")},
                           closed=True, shared_queues=("default", "batch"),
                           shared_handlers=("echo", "sleep", "fail", "http"))


def refusal(catalog: DeclaredQueues, **changes: Any) -> InvalidSpec:
    with pytest.raises(InvalidSpec) as error:
        catalog.check(replace(SPEC, **changes))
    return error.value


def test_with_tokens_a_tenant_without_lists_may_use_only_shared_queues_and_handlers() -> None:
    for queue in ("default", "batch"):
        for handler in ("echo", "sleep", "fail", "http"):
            CLOSED.check(replace(SPEC, tenant="beta", queue=queue, handler=handler))
    assert refusal(CLOSED, tenant="beta", queue="acme-private").field == "spec.queue"
    assert refusal(CLOSED, tenant="beta", queue="gpu").field == "spec.queue"
    assert refusal(CLOSED, tenant="beta", handler="acme.reports:run").field == "spec.handler"


def test_with_tokens_a_tenants_own_lists_are_the_whole_of_what_it_may_use() -> None:
    CLOSED.check(replace(SPEC, queue="acme-private", handler="acme.reports:run"))
    CLOSED.check(replace(SPEC, queue="default", handler="echo"))
    # A shared queue or handler the operator left out of acme's lists is closed to it, as in
    # open mode: a list means the same in either.
    assert refusal(CLOSED, queue="batch").field == "spec.queue"
    assert refusal(CLOSED, handler="http").field == "spec.handler"


def test_with_tokens_another_tenants_queue_and_a_made_up_one_get_the_same_words() -> None:
    for field_name, theirs, made_up in (("queue", "acme-private", "no-such-queue"),
                                        ("handler", "acme.reports:run", "no.such:handler")):
        words = [str(refusal(CLOSED, tenant="beta", **{field_name: name})).replace(
            repr(name), "X") for name in (theirs, made_up)]
        assert words[0] == words[1], field_name
        for name in ("acme-private", "acme.reports:run", "acme", "default", "batch"):
            assert name not in words[0]


def test_an_operator_may_share_nothing_or_take_a_built_in_handler_away() -> None:
    strict = DeclaredQueues.of(("default",), closed=True, shared_handlers=("echo",))
    assert refusal(strict, tenant="beta").field == "spec.queue"
    strict = DeclaredQueues.of(("default",), closed=True, shared_queues=("default",),
                               shared_handlers=("echo",))
    strict.check(replace(SPEC, tenant="beta"))
    assert refusal(strict, tenant="beta", handler="http").field == "spec.handler"


def test_open_mode_ignores_the_shared_lists() -> None:
    opened = replace(CLOSED, closed=False)
    opened.check(replace(SPEC, tenant="beta", queue="gpu", handler="anything"))
