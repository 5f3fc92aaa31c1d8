"""Where a run stands among dependent jobs (issue 16, docs/dependencies.md): its chain, as
the Run aggregate keeps it and as its creating event carries it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID


@dataclass(frozen=True)
class Chain:
    """Where a run stands among dependent jobs.

    `cascade` is None for a run whose end tells its job's dependents nothing (a manual
    trigger or backfill without the cascade flag); "" for the scheduled chain; a request id
    for the runs of a cascading trigger or backfill and the dependent runs that follow them.
    `logical_time` is None when it is the run's own fire time.
    """

    cascade: str | None = None
    logical_time: datetime | None = None
    upstream_run_ids: tuple[UUID, ...] = ()
    depth: int = 0


NO_CHAIN = Chain()
SCHEDULED_CHAIN = Chain(cascade="")


def chain_of(trigger: str, logical_time: datetime | None, cascade: str | None,
             upstream_run_ids: Any, depth: int) -> Chain:
    """A run's chain from its creating event's fields. A scheduled run is always in the
    scheduled chain, whatever its event says (events written before dependencies carry
    nothing)."""
    if trigger == "schedule" and not cascade:
        cascade = ""
    if cascade is None and logical_time is None and not upstream_run_ids and not depth:
        return NO_CHAIN
    if cascade == "" and logical_time is None and not upstream_run_ids and not depth:
        return SCHEDULED_CHAIN
    ids = tuple(u if isinstance(u, UUID) else UUID(str(u)) for u in upstream_run_ids or ())
    return Chain(cascade, logical_time, ids, int(depth or 0))


def chain_fields(chain: Chain) -> dict[str, Any]:
    """The creating event's fields for a chain."""
    return {"logical_time": chain.logical_time, "cascade": chain.cascade,
            "upstream_run_ids": chain.upstream_run_ids, "depth": chain.depth}
