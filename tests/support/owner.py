"""A partition owner on in-memory fakes, owning partition 0 at once, and the log replay it
catches up with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from cronlog.commands.owner.cycle_budget import TENANT_SHARE
from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.commands.owner.ports import Claim, LogReplay, OwnerMetrics, Topics
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.domain.limits import TenantLimits
from cronlog.infra.avro.event_mapping import AvroEventRecords
from tests.support.clock import FakeClock
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport


@dataclass
class CatchUpAfter:
    """A catch-up that is done after `rounds` advances (1: nothing to replay)."""

    claims: list[Claim]
    rounds: int = 1

    def advance(self, seconds: float) -> list[Claim]:
        self.rounds -= 1
        if self.rounds > 0:
            return []
        claims, self.claims = self.claims, []
        return claims

    @property
    def finished(self) -> bool:
        return not self.claims

    def close(self) -> None:
        pass


def make_owner(store: FakeStore, transport: FakeTransport, clock: FakeClock,
               limits: TenantLimits | None = None,
               sparse_lookahead: timedelta | None = None,
               monotonic: FakeClock | None = None,
               start_timeout: timedelta = timedelta(minutes=5),
               replay: LogReplay | None = None,
               cycle_budget: timedelta = timedelta(milliseconds=500),
               metrics: OwnerMetrics | None = None,
               tenant_share: float | None = TENANT_SHARE,
               queues: DeclaredQueues | None = None) -> PartitionOwner:
    class Replay:
        def start(self, claims: Sequence[Claim]) -> CatchUpAfter:
            return CatchUpAfter(list(claims))

    owner = PartitionOwner(
        owner_id="o1", transport=transport, store=store, replay=replay or Replay(),
        records=AvroEventRecords(), clock=clock,
        topics=Topics("job-events", "run-events", "replies", lambda q: f"dispatch.{q}"),
        lookahead=timedelta(seconds=2), limits=limits, sparse_lookahead=sparse_lookahead,
        monotonic=monotonic or FakeClock(), start_timeout=start_timeout,
        cycle_budget=cycle_budget, metrics=metrics, tenant_share=tenant_share,
        queues=queues)
    owner.assigned([0])
    assert owner.epochs or replay, "with nothing to replay, partition 0 is owned at once"
    return owner
