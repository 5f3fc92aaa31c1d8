"""CreateJobs at the gRPC edge: the batch's bounds, each item's tenant check and spec
conversion, and each item's outcome as a result with a status name and a field.

The batch as a whole is refused (INVALID_ARGUMENT, field `items`) only when it is over its
bounds; everything else about one item is that item's result (DESIGN invariant 9).
"""

from __future__ import annotations

import logging

from cronlog.commands.api.job_api import CommandRejected
from cronlog.commands.api.job_batch import MOST_ITEMS, BatchItem, ItemCreated, ItemOutcome, JobBatch
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.grpc import convert
from cronlog.infra.grpc.error_status import status_of
from cronlog.v1 import job_service_pb2 as pb

log = logging.getLogger(__name__)

# Well below gRPC's default 4 MiB a message, so a batch just over it is told which field is
# too big rather than refused by the transport; a job's payload alone may be 256 KiB.
MOST_ITEM_BYTES = 3 * 1024 * 1024
# An item's error message is cut here: 1,000 of them must fit one response.
MOST_MESSAGE_CHARS = 1024


def check_bounds(request: pb.CreateJobsRequest) -> None:
    """Refuses the whole batch, before anything is read or sent, when it is too large."""
    if len(request.items) > MOST_ITEMS:
        raise InvalidSpec("items", f"{len(request.items)} items; a batch holds at most "
                                   f"{MOST_ITEMS}: split it")
    size = request.ByteSize()
    if size > MOST_ITEM_BYTES:
        raise InvalidSpec("items", f"{size} bytes of items; a batch holds at most "
                                   f"{MOST_ITEM_BYTES}: split it")


def item_error(exc: Exception) -> tuple[str, str, str | None]:
    """(status name, message, field) of an item's failure, as CreateJob would answer it."""
    status = status_of(exc)
    if status is not None:
        return status.code.name, status.message, status.field
    # A bug shows in the log, not in a caller's answer; the other items go on.
    log.error("CreateJobs item failed unexpectedly", exc_info=exc)
    return "INTERNAL", "internal error; the item was not created", None


def _result(request_id: str, index: int, outcome: ItemOutcome) -> pb.CreateJobsResult:
    if isinstance(outcome, ItemCreated):
        return pb.CreateJobsResult(request_id=request_id, job=pb.CreatedJob(
            job_id=str(outcome.job_id), version=outcome.version,
            already_existed=outcome.already_existed))
    code, message, field = item_error(outcome)
    return pb.CreateJobsResult(request_id=request_id, error=pb.ItemError(
        code=code, message=message[:MOST_MESSAGE_CHARS],
        field=f"items[{index}].{field}" if field else ""))


def create_jobs(request: pb.CreateJobsRequest, caller: str | None,
                batch: JobBatch) -> pb.CreateJobsResponse:
    """Answers a batch: each item as CreateJob would, in the caller's tenant only."""
    check_bounds(request)
    outcomes: list[ItemOutcome | None] = [None] * len(request.items)
    items: list[BatchItem] = []
    placed: list[int] = []
    for index, item in enumerate(request.items):
        try:
            if caller is not None and item.spec.tenant and item.spec.tenant != caller:
                # The same words as CreateJob's, for this item alone.
                raise CommandRejected("PERMISSION_DENIED", f"spec.tenant {item.spec.tenant!r} "
                                      "is not the authenticated tenant", "spec.tenant")
            if not item.HasField("spec"):
                raise InvalidSpec("spec", "a job spec is required")
            spec = pb.JobSpec()
            spec.CopyFrom(item.spec)
            if caller and not spec.tenant:
                spec.tenant = caller
            items.append(BatchItem(item.request_id, convert.spec_in(spec)))
            placed.append(index)
        except Exception as exc:
            outcomes[index] = exc
    for index, outcome in zip(placed, batch.create_jobs(items), strict=True):
        outcomes[index] = outcome
    return pb.CreateJobsResponse(results=[
        _result(item.request_id, index, outcome if outcome is not None
                else RuntimeError("not decided"))
        for index, (item, outcome) in enumerate(zip(request.items, outcomes, strict=True))])
