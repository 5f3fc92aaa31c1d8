"""The api's check of a job's `after` before it reaches the owner (docs/dependencies.md).

Every upstream must be a job of the caller's tenant that exists and is not deleted, and the
tenant's dependency graph with the new edges must have no cycle. The owners check tenant and
existence again when they link the jobs; this is the error the user sees, with the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from cronlog.commands.api.ports import UpstreamReader
from cronlog.domain.dependency import MAX_CHAIN_DEPTH, Dependency, validate_dependency
from cronlog.domain.dependency_graph import require_acyclic
from cronlog.domain.errors import InvalidSpec

FIELD = "spec.after.job_ids"


class UpstreamNotFound(InvalidSpec):
    """An upstream that is not a live job of the caller's tenant. Another tenant's job reads
    exactly like a missing one (invariant 10)."""

    def __init__(self, job_id: UUID) -> None:
        super().__init__(FIELD, f"job {job_id} not found")
        self.job_id = job_id


class ChainTooDeep(InvalidSpec):
    """The jobs above this one form a chain longer than a dependent run may be deep."""

    def __init__(self) -> None:
        super().__init__(FIELD, f"the jobs it runs after form a chain of more than "
                                f"{MAX_CHAIN_DEPTH} levels; runs that deep are recorded "
                                "missed")


def check_upstreams(job_id: UUID, tenant: str, dependency: Dependency,
                    reader: UpstreamReader) -> None:
    """Raises InvalidSpec on spec.after.job_ids unless `job_id` may run after these jobs.

    Walks up from the named jobs one level per query, reading each job at most once and
    only the tenant's: the graph that matters is what lies above the job, and a tenant's
    other chains are none of this request's business. The walk is at most MAX_CHAIN_DEPTH
    levels deep, one query each, so a request costs a bounded number of reads.
    """
    validate_dependency(dependency, job_id)  # names a job running after itself plainly
    named = reader.upstreams(tenant, dependency.job_ids)
    for upstream in dependency.job_ids:
        if upstream not in named:
            raise UpstreamNotFound(upstream)
    graph: dict[UUID, tuple[UUID, ...]] = dict(named)
    frontier = _above(named, graph, job_id)
    levels = 1
    while frontier:
        levels += 1
        found = reader.upstreams(tenant, frontier)
        if found and levels > MAX_CHAIN_DEPTH:
            raise ChainTooDeep()
        # A job named upstream that is gone (deleted, or a race) runs after nothing.
        graph.update({j: found.get(j, ()) for j in frontier})
        frontier = _above(found, graph, job_id)
    require_acyclic(job_id, dependency.job_ids, graph)


def _above(level: Mapping[UUID, tuple[UUID, ...]], seen: Mapping[UUID, object],
           job_id: UUID) -> set[UUID]:
    """The jobs the level runs after that are not read yet. The job itself is never read:
    its stored `after` is the one being replaced."""
    return {u for ups in level.values() for u in ups if u not in seen and u != job_id}
