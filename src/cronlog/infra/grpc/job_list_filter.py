"""ListJobs' filters from a request, each bounded: a bad one is INVALID_ARGUMENT naming its
field, and the list is not read."""

from __future__ import annotations

from collections.abc import Sequence

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.spec import MAX_LABEL_CHARS, MAX_LABELS, QUEUE_PATTERN
from cronlog.infra.postgres.job_queries import JobListFilter
from cronlog.v1 import job_service_pb2 as pb

# A job name is at most 200 characters (domain.spec.NAME_PATTERN): a longer part of one
# matches nothing.
MAX_NAME_CONTAINS = 200
LISTED_STATUSES: dict[int, str] = {pb.JOB_STATUS_ACTIVE: "active", pb.JOB_STATUS_PAUSED: "paused",
                   pb.JOB_STATUS_COMPLETED: "completed"}


def _no_nul(value: str, field: str) -> None:
    # Postgres text cannot hold U+0000; refused here rather than failing in the store.
    if "\x00" in value:
        raise InvalidSpec(field, "must not contain the character U+0000")


def _statuses(values: Sequence[int]) -> tuple[str, ...]:
    names: list[str] = []
    for value in values:
        if value == pb.JOB_STATUS_DELETED:
            raise InvalidSpec("statuses", "deleted jobs are never listed")
        if value not in LISTED_STATUSES:
            raise InvalidSpec("statuses", f"unknown job status {value}; give ACTIVE, PAUSED "
                                          f"or COMPLETED")
        if LISTED_STATUSES[value] in names:
            raise InvalidSpec("statuses", f"{LISTED_STATUSES[value]} is given twice")
        names.append(LISTED_STATUSES[value])
    return tuple(names)


def _labels(selectors: Sequence[pb.LabelSelector]) -> tuple[tuple[str, str | None], ...]:
    if len(selectors) > MAX_LABELS:
        raise InvalidSpec("labels", f"at most {MAX_LABELS} label selectors (a job has at "
                                    f"most {MAX_LABELS} labels), got {len(selectors)}")
    labels: list[tuple[str, str | None]] = []
    for selector in selectors:
        if not selector.key or len(selector.key) > MAX_LABEL_CHARS:
            raise InvalidSpec("labels", f"a label key must be 1-{MAX_LABEL_CHARS} characters "
                                        f"({selector.key[:40]!r})")
        _no_nul(selector.key, "labels")
        value: str | None = None
        if selector.HasField("value"):
            if len(selector.value) > MAX_LABEL_CHARS:
                raise InvalidSpec("labels", f"label {selector.key[:40]!r}: a value must be at "
                                            f"most {MAX_LABEL_CHARS} characters")
            _no_nul(selector.value, "labels")
            value = selector.value
        labels.append((selector.key, value))
    return tuple(labels)


def job_list_filter(request: pb.ListJobsRequest) -> JobListFilter:
    if request.queue and not QUEUE_PATTERN.fullmatch(request.queue):
        raise InvalidSpec("queue", f"queue {request.queue[:140]!r} must match "
                                   f"{QUEUE_PATTERN.pattern}")
    if len(request.name_contains) > MAX_NAME_CONTAINS:
        raise InvalidSpec("name_contains", f"at most {MAX_NAME_CONTAINS} characters (a job "
                                           f"name's length), got {len(request.name_contains)}")
    _no_nul(request.name_contains, "name_contains")
    return JobListFilter(statuses=_statuses(request.statuses), queue=request.queue,
                         labels=_labels(request.labels), name_contains=request.name_contains)
