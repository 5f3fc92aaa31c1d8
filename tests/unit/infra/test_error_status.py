"""Errors are mapped once: each domain error carries its status, and every RPC, every item
of a batch and every owner reply answers it from there."""

from __future__ import annotations

import importlib
import pkgutil

import grpc
import pytest

import cronlog
from cronlog.commands.api.job_api import CommandRejected, NotVisibleYet
from cronlog.commands.owner.request_ids import Outcome
from cronlog.domain.calendar import CalendarExists, CalendarFull, CalendarNotFound
from cronlog.domain.errors import (
    DomainError,
    InvalidSpec,
    JobNotFound,
    ScheduleTooCostly,
    StaleVersion,
)
from cronlog.domain.limits import TenantLimitReached
from cronlog.infra.grpc.create_jobs import item_error
from cronlog.infra.grpc.error_status import status_of
from cronlog.infra.kafka.command_channel import CommandNotAnswered
from cronlog.infra.postgres.job_queries import InvalidPageToken


def _every_domain_error() -> set[type[DomainError]]:
    for module in pkgutil.walk_packages(cronlog.__path__, "cronlog."):
        if not module.name.startswith(("cronlog.v1", "cronlog.infra.entrypoints.cli")):
            importlib.import_module(module.name)
    found: set[type[DomainError]] = set()
    todo: list[type[DomainError]] = [DomainError]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.add(sub)
            todo.append(sub)
    return found


def test_every_domain_error_names_a_status_grpc_has() -> None:
    errors = _every_domain_error()
    assert len(errors) > 15, sorted(e.__name__ for e in errors)
    for error in errors:
        assert isinstance(getattr(grpc.StatusCode, error.status, None), grpc.StatusCode), error


@pytest.mark.parametrize(("error", "code", "field"), [
    (InvalidSpec("spec.queue", "bad"), grpc.StatusCode.INVALID_ARGUMENT, "spec.queue"),
    # A subclass keeps its parent's status: the owner once answered this one by its class
    # name, FAILED_PRECONDITION.
    (ScheduleTooCostly("spec.schedule.cron", "too costly"), grpc.StatusCode.INVALID_ARGUMENT,
     "spec.schedule.cron"),
    (JobNotFound("job x not found"), grpc.StatusCode.NOT_FOUND, None),
    (CalendarNotFound("no"), grpc.StatusCode.NOT_FOUND, None),
    (CalendarExists("exists"), grpc.StatusCode.ALREADY_EXISTS, None),
    (CalendarFull("full"), grpc.StatusCode.RESOURCE_EXHAUSTED, None),
    (TenantLimitReached("limit"), grpc.StatusCode.RESOURCE_EXHAUSTED, None),
    (StaleVersion("stale"), grpc.StatusCode.FAILED_PRECONDITION, None),
    (CommandRejected("PERMISSION_DENIED", "not yours", "spec.tenant"),
     grpc.StatusCode.PERMISSION_DENIED, "spec.tenant"),
    (CommandRejected("NO_SUCH_STATUS", "odd"), grpc.StatusCode.INTERNAL, None),
    (InvalidPageToken("not ours"), grpc.StatusCode.INVALID_ARGUMENT, "page_token"),
    (CommandNotAnswered("no reply"), grpc.StatusCode.UNAVAILABLE, None),
    # The job exists: a retry with the same request id answers it, as UNAVAILABLE invites.
    (NotVisibleYet("not visible yet"), grpc.StatusCode.UNAVAILABLE, None),
])
def test_one_table_answers_the_rpc_the_batch_item_and_the_owner(
        error: Exception, code: grpc.StatusCode, field: str | None) -> None:
    status = status_of(error)
    assert status is not None and (status.code, status.field) == (code, field)
    assert item_error(error)[0::2] == (code.name, field)
    if isinstance(error, DomainError) and not isinstance(error, CommandRejected):
        refused = Outcome.refused(error)
        assert (refused.ok, refused.code, refused.field) == (False, code.name, field)


def test_a_bug_is_not_an_answer() -> None:
    assert status_of(KeyError("oops")) is None
    assert item_error(KeyError("oops"))[0] == "INTERNAL"


def test_every_rpc_of_the_servicer_answers_errors_the_one_way() -> None:
    from cronlog.infra.grpc.servicer import JobServiceServicer
    from cronlog.v1 import job_service_pb2_grpc as pb_grpc

    rpcs = [name for name in vars(pb_grpc.JobServiceServicer) if name[0].isupper()]
    assert len(rpcs) >= 18
    for name in rpcs:
        method = getattr(JobServiceServicer, name)
        # The servicer's own, or its mixins' (infra/grpc/channel_rpcs.py,
        # dead_letter_rpcs.py, restore_rpcs.py, proof_rpcs.py), never the generated base's UNIMPLEMENTED.
        assert method.__qualname__.split(".")[0] in (
                "JobServiceServicer", "ChannelRpcs", "DeadLetterRpcs", "AlertDeliveryRpcs",
                "JobRestoreRpcs", "HistoryProofRpcs"), f"{name} not served"
        assert hasattr(method, "__wrapped__"), f"{name} is not @answered"
