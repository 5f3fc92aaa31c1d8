"""A takeover ends the open transaction of an earlier owner that left without handing over
(issue 34, item 3): before the catch-up reads the log, the owner asks its fence about every
earlier owner of the partitions it took, never about itself."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.commands.owner.ports import Claim, Topics
from cronlog.infra.avro.event_mapping import AvroEventRecords
from tests.support.clock import FakeClock
from tests.support.owner import CatchUpAfter
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport


@dataclass
class HeldBefore(FakeStore):
    """Partitions last held by the owners named in `before`."""

    before: dict[int, str | None] = field(default_factory=dict)

    def take_epochs(self, partitions: Sequence[int], owner: str) -> list[Claim]:
        self.epoch += 1
        return [Claim(p, self.epoch, 0, 0, self.before.get(p)) for p in partitions]


@dataclass
class RecordingFence:
    asked: list[list[str]] = field(default_factory=list)
    # What the catch-up had started when the fence was asked.
    replays_then: list[int] = field(default_factory=list)
    replay: RecordingReplay | None = None

    def fence_departed(self, owners: Collection[str]) -> list[str]:
        self.asked.append(list(owners))
        self.replays_then.append(len(self.replay.started) if self.replay else -1)
        return list(owners)


@dataclass
class RecordingReplay:
    started: list[list[Claim]] = field(default_factory=list)

    def start(self, claims: Sequence[Claim]) -> CatchUpAfter:
        self.started.append(list(claims))
        return CatchUpAfter(list(claims))


def owner_with(store: HeldBefore, fence: RecordingFence) -> PartitionOwner:
    replay = RecordingReplay()
    fence.replay = replay
    return PartitionOwner(
        owner_id="o1", transport=FakeTransport(), store=store, replay=replay,
        records=AvroEventRecords(), clock=FakeClock(),
        topics=Topics("job-events", "run-events", "replies", lambda q: f"dispatch.{q}"),
        lookahead=timedelta(seconds=8), monotonic=FakeClock(), fence=fence)


def test_earlier_owners_are_fenced_once_each_before_the_catch_up_reads_the_log() -> None:
    store = HeldBefore(before={0: "o2", 1: "o3", 2: "o2", 3: None})
    fence = RecordingFence()
    owner = owner_with(store, fence)
    owner.assigned([0, 1, 2, 3])
    assert fence.asked == [["o2", "o3"]], "each earlier owner once, none for a fresh row"
    assert fence.replays_then == [0], "fenced before the catch-up started reading"
    assert owner.epochs.keys() == {0, 1, 2, 3}


def test_an_owner_never_fences_itself_nor_asks_when_nobody_held_the_partitions() -> None:
    store = HeldBefore(before={0: "o1", 1: None})
    fence = RecordingFence()
    owner = owner_with(store, fence)
    owner.assigned([0, 1])
    assert fence.asked == []
    # Taken again after a resync: still itself.
    owner.assigned([0])
    assert fence.asked == []
