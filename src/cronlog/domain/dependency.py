"""Job dependencies (issue 16): a job that runs `after` other jobs' runs end.

The value objects, their validation, the condition an upstream end must meet, and the id of
a dependent run. How the ends of several upstream jobs meet is in fan_in.py; cycles in
dependency_graph.py. See docs/dependencies.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from uuid import UUID, uuid5

from cronlog.domain.bounds import LONGEST_DURATION, require_duration, require_in_range
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.ids import MAX_REQUEST_ID_CHARS
from cronlog.domain.run_states import CANCELLED, DEAD_LETTERED, MISSED, SKIPPED, SUCCEEDED

# An upstream's owner writes one message per dependent in the transaction that ends its
# run, and a dependent's every waiting logical time names the upstreams it still waits for:
# both bounds keep one cycle's work and one job's state small (invariant 10). Sixteen covers
# the fan-ins of real pipelines (a report after its day's loads); a wider one is a chain of
# two levels.
MAX_UPSTREAMS = 16
# Dependents of one upstream: the messages its run end writes, in one transaction.
MAX_DEPENDENTS = 100
# A dependent run is one level deeper than its deepest upstream run. Cycles are refused at
# create and update, but two updates in two partitions could race past the check: a chain
# that grows beyond this is a cycle that slipped through, and is stopped (recorded missed).
MAX_CHAIN_DEPTH = 64
DEFAULT_WAIT_WINDOW = timedelta(hours=1)
MAX_WAIT_WINDOW = LONGEST_DURATION

# Fixed: changing it would change the id of every dependent run cronlog has handed out.
DEPENDENCY_RUN_NAMESPACE = UUID("9a4e6c2d-1b7f-4d3a-8e5c-6f0b2a9d7c44")

FIELD = "spec.after"


class DependencyCondition(StrEnum):
    """Which ends of an upstream run let its dependent run."""

    ON_SUCCESS = "success"
    ON_FAILURE = "failure"
    ON_ANY = "any"


# Ends of runs that ran (or were meant to and were stopped). A MISSED or SKIPPED upstream run
# never ran: it meets no condition, so the chain stops there and says why.
_MEETS: dict[DependencyCondition, frozenset[str]] = {
    DependencyCondition.ON_SUCCESS: frozenset({SUCCEEDED}),
    DependencyCondition.ON_FAILURE: frozenset({DEAD_LETTERED}),
    DependencyCondition.ON_ANY: frozenset({SUCCEEDED, DEAD_LETTERED, CANCELLED}),
}
UPSTREAM_END_STATUSES = frozenset({SUCCEEDED, DEAD_LETTERED, CANCELLED, MISSED, SKIPPED})


def meets(condition: DependencyCondition, status: str) -> bool:
    """Whether an upstream run that ended with `status` lets a dependent on `condition` run."""
    return status in _MEETS[DependencyCondition(condition)]


@dataclass(frozen=True)
class Dependency:
    """A job's `after`: the jobs whose runs it follows, on which ends, and how long the first
    upstream end of a logical time waits for the others."""

    job_ids: tuple[UUID, ...]
    condition: DependencyCondition = DependencyCondition.ON_SUCCESS
    wait_window: timedelta = DEFAULT_WAIT_WINDOW


def validate_dependency(dependency: Dependency, job_id: UUID | None = None) -> Dependency:
    """The dependency with its job ids in a canonical order, or InvalidSpec naming the field.

    `job_id` is the dependent's own id when known (updates; a create knows it from the
    request id): a job cannot follow itself.
    """
    ids = dependency.job_ids
    if not ids:
        raise InvalidSpec(f"{FIELD}.job_ids", "name at least one upstream job")
    if len(ids) > MAX_UPSTREAMS:
        raise InvalidSpec(f"{FIELD}.job_ids",
                          f"at most {MAX_UPSTREAMS} upstream jobs, got {len(ids)}")
    seen: set[UUID] = set()
    for upstream in ids:
        if not isinstance(upstream, UUID):
            raise InvalidSpec(f"{FIELD}.job_ids", f"{upstream!r} is not a job id")
        if upstream in seen:
            raise InvalidSpec(f"{FIELD}.job_ids", f"job {upstream} is named twice")
        if upstream == job_id:
            raise InvalidSpec(f"{FIELD}.job_ids", "a job cannot run after itself")
        seen.add(upstream)
    try:
        condition = DependencyCondition(dependency.condition)
    except ValueError:
        choices = ", ".join(c.value for c in DependencyCondition)
        raise InvalidSpec(f"{FIELD}.condition",
                          f"{dependency.condition!r} is not one of {choices}") from None
    require_duration(dependency.wait_window, f"{FIELD}.wait_window", MAX_WAIT_WINDOW)
    return Dependency(tuple(sorted(ids)), condition, dependency.wait_window)


@dataclass(frozen=True, order=True)
class ChainSlot:
    """The logical time one upstream run belongs to, and the chain it travels in.

    `cascade` is empty for the scheduled chain (runs fired by a schedule and the dependent
    runs that follow them); a TriggerJob or BackfillJob that cascades names its request id
    here, so its runs meet one another and never the scheduled runs of the same time.
    """

    logical_time: datetime
    cascade: str = ""


@dataclass(frozen=True)
class UpstreamEnd:
    """What the "upstream run ended" message (UpstreamRunEnded) tells a dependent's owner."""

    upstream_job_id: UUID
    upstream_run_id: UUID
    status: str
    slot: ChainSlot
    # The upstream run's depth: 0 for a run fired by a schedule, trigger or backfill.
    depth: int = 0


def require_upstream_end(end: UpstreamEnd) -> UpstreamEnd:
    """The end if it is well formed, or InvalidSpec naming the field (invariant 9: a forged or
    corrupt message is refused on its own)."""
    if end.status not in UPSTREAM_END_STATUSES:
        raise InvalidSpec("status", f"{end.status!r} is not the end of a run")
    logical_time = require_in_range(end.slot.logical_time, "logical_time")
    if not 0 <= end.depth <= MAX_CHAIN_DEPTH:
        raise InvalidSpec("depth", f"must be between 0 and {MAX_CHAIN_DEPTH}, got {end.depth}")
    # A cascade is a request id (or '' for the scheduled chain), and it is kept in the fan-in.
    if len(end.slot.cascade) > MAX_REQUEST_ID_CHARS:
        raise InvalidSpec("cascade", f"at most {MAX_REQUEST_ID_CHARS} characters, "
                                     f"got {len(end.slot.cascade)}")
    if end.slot.logical_time.tzinfo is not UTC:
        return UpstreamEnd(end.upstream_job_id, end.upstream_run_id, end.status,
                           ChainSlot(logical_time, end.slot.cascade), end.depth)
    return end


def dependent_run_id(job_id: UUID, upstream_run_ids: Iterable[UUID]) -> UUID:
    """Invariant 11: the id (and idempotency key) of the dependent run that follows these
    upstream runs. Order-free: the ends may arrive in any order, any number of times."""
    joined = ",".join(str(run_id) for run_id in sorted(set(upstream_run_ids)))
    return uuid5(DEPENDENCY_RUN_NAMESPACE, f"{job_id}\x00{joined}")
