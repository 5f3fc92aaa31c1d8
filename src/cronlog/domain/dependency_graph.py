"""Cycles among a tenant's job dependencies, refused at create and update (docs/dependencies.md).

The graph is a mapping from each job to the jobs it runs after, as the api reads it for one
tenant; the check walks it once (iteratively: a long chain must not exhaust Python's stack).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from uuid import UUID

from cronlog.domain.dependency import FIELD
from cronlog.domain.errors import InvalidSpec


class DependencyCycle(InvalidSpec):
    """A create or update would make a job run, however indirectly, after itself."""

    def __init__(self, path: Sequence[UUID]) -> None:
        super().__init__(f"{FIELD}.job_ids",
                         "would form a cycle: " + " runs after ".join(map(str, path)))
        self.path = tuple(path)


def find_cycle(job_id: UUID, upstreams: Collection[UUID],
               graph: Mapping[UUID, Collection[UUID]]) -> tuple[UUID, ...] | None:
    """The cycle that giving `job_id` these `upstreams` would close, as the path
    job → upstream → … → job, or None. `graph` is every other job's upstreams (an entry for
    `job_id` itself is ignored: it is being replaced). Each job is visited at most once."""
    if job_id in upstreams:
        return (job_id, job_id)
    parent: dict[UUID, UUID] = {}
    stack: list[UUID] = []
    for upstream in sorted(upstreams):
        if upstream not in parent:
            parent[upstream] = job_id
            stack.append(upstream)
        while stack:
            current = stack.pop()
            for next_up in sorted(graph.get(current, ())):
                if next_up == job_id:
                    return _path(parent, current, job_id)
                if next_up not in parent:
                    parent[next_up] = current
                    stack.append(next_up)
    return None


def _path(parent: Mapping[UUID, UUID], last: UUID, job_id: UUID) -> tuple[UUID, ...]:
    path = [job_id, last]
    while path[-1] != job_id:
        path.append(parent[path[-1]])
    path.reverse()  # job → first upstream → … → last → job
    return tuple(path)


def require_acyclic(job_id: UUID, upstreams: Collection[UUID],
                    graph: Mapping[UUID, Collection[UUID]]) -> None:
    """Raises DependencyCycle naming the cycle, if there is one."""
    cycle = find_cycle(job_id, upstreams, graph)
    if cycle is not None:
        raise DependencyCycle(cycle)
