"""The owner with more logical partitions than Kafka partitions (issue 34): owning Kafka
partition k is owning every logical partition l with l mod K = k."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from uuid import UUID

from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.commands.owner.ports import Claim, DueWindow, Outgoing, Produced, Topics
from cronlog.domain.ids import job_id_for_request
from cronlog.domain.job import Job
from cronlog.domain.partition_layout import PartitionLayout
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import AvroEventRecords
from cronlog.ports import InboundMessage
from tests.support.clock import T0, FakeClock
from tests.support.owner import CatchUpAfter
from tests.support.owner_inbox import create_message
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport

LAYOUT = PartitionLayout(8, 2)

ONE_SHOT = JobSpec(name="n", tenant="t", queue="q1", handler="echo", at=T0 + timedelta(seconds=1))


def logical(job_id: UUID | str) -> int:
    return LAYOUT.logical_of(str(job_id))


@dataclass
class LayoutStore(FakeStore):
    """A store keyed by logical partition, as the Postgres projection is; each logical
    partition's epoch its own, so the tests tell which one fences."""

    taken: list[list[int]] = field(default_factory=list)
    asked: list[frozenset[int]] = field(default_factory=list)
    caught: list[list[int]] = field(default_factory=list)

    def take_epochs(self, partitions: Sequence[int], owner: str) -> list[Claim]:
        self.taken.append(list(partitions))
        self.epoch += 1
        return [Claim(p, 100 * self.epoch + p, 10 * p, 20 * p) for p in partitions]

    def due_jobs(self, partitions: Iterable[int], window: DueWindow, limit: int,
                 excluded_tenants: Sequence[str] = ()) -> list[Job]:
        owned = frozenset(partitions)
        self.asked.append(owned)
        return [j for j in super().due_jobs(owned, window, limit, excluded_tenants)
                if logical(j.id) in owned]

    def in_flight_runs(self, partitions: Sequence[int]) -> list[tuple[int, Run]]:
        return [(logical(r.job_id), r) for r in self.runs.values()
                if r.status in ("scheduled", "running") and logical(r.job_id) in partitions]

    def caught_up(self, claims: Sequence[Claim], group_member: str) -> None:
        self.caught.append(sorted(c.partition for c in claims))


@dataclass
class LayoutTransport(FakeTransport):
    """Produces each record to the Kafka partition of its key, as the producers'
    murmur2 partitioner does with K partitions."""

    offsets: Counter[tuple[str, int]] = field(default_factory=Counter)

    def transact(self, outgoing: Sequence[Outgoing]) -> Sequence[Produced]:
        self.transactions.append(list(outgoing))
        produced = []
        for out in outgoing:
            kafka = LAYOUT.kafka_of_key(out.key)
            offset = self.offsets[(out.topic, kafka)]
            self.offsets[(out.topic, kafka)] += 1
            produced.append(Produced(out.topic, kafka, offset, out.name, out.record, b"",
                                     out.key))
        return produced


@dataclass
class RecordingReplay:
    started: list[list[Claim]] = field(default_factory=list)

    def start(self, claims: Sequence[Claim]) -> CatchUpAfter:
        self.started.append(list(claims))
        return CatchUpAfter(list(claims))


def layout_owner(store: LayoutStore, transport: LayoutTransport, clock: FakeClock,
                 replay: RecordingReplay | None = None) -> PartitionOwner:
    return PartitionOwner(
        owner_id="o1", transport=transport, store=store, replay=replay or RecordingReplay(),
        records=AvroEventRecords(), clock=clock,
        topics=Topics("job-events", "run-events", "replies", lambda q: f"dispatch.{q}"),
        lookahead=timedelta(seconds=2), monotonic=FakeClock(), layout=LAYOUT)


def create(request_id: str) -> InboundMessage:
    message = create_message(ONE_SHOT, request_id)
    job_id = job_id_for_request(ONE_SHOT.tenant, request_id)
    return message._replace(partition=LAYOUT.kafka_of_key(str(job_id)), key=str(job_id))


def jobs_in_every_logical_partition() -> list[InboundMessage]:
    found: dict[int, InboundMessage] = {}
    n = 0
    while len(found) < LAYOUT.logical:
        message = create(f"r{n}")
        found.setdefault(logical(message.record["job_id"]), message)
        n += 1
    return [found[p] for p in sorted(found)]


def test_a_kafka_partition_is_taken_with_all_its_logical_partitions_in_one_round_trip() -> None:
    store, transport, replay = LayoutStore(), LayoutTransport(), RecordingReplay()
    owner = layout_owner(store, transport, FakeClock(), replay)
    owner.assigned([1])
    assert store.taken == [[1, 3, 5, 7]], "one take for the epochs of all of them"
    # The catch-up reads Kafka partition 1 once, from its anchor's offsets.
    assert replay.started == [[Claim(1, 101, 10, 20)]]
    assert owner.epochs == {1: 101}, "the anchor's epoch fences Kafka partition 1"
    assert owner.owned == frozenset({1, 3, 5, 7})
    assert store.caught == [[1, 3, 5, 7]], "readiness sees every logical partition caught up"
    assert transport.held == set()


def test_jobs_of_every_logical_partition_fire_once_and_apply_per_kafka_partition() -> None:
    store = LayoutStore(replays=True)
    transport, clock = LayoutTransport(), FakeClock()
    owner = layout_owner(store, transport, clock)
    owner.assigned([0, 1])
    assert owner.owned == frozenset(range(8)) and owner.epochs == {0: 100, 1: 101}
    transport.inbox.extend(jobs_in_every_logical_partition())
    owner.cycle()
    assert {logical(j) for j in store.jobs} == set(range(8))
    clock.at = T0 + timedelta(seconds=1)
    for _ in range(3):
        owner.cycle()
    fired = Counter(str(o.record["job_id"]) for t in transport.transactions for o in t
                    if o.name == "RunScheduled")
    assert sorted(fired.values()) == [1] * 8, "each job once"
    assert store.asked[-1] == frozenset(range(8)), "the due index is asked by logical partition"
    # Applied by Kafka partition, each fenced by its anchor's epoch.
    assert {(partition, epoch) for partition, epoch, _ in store.applied} == {(0, 100), (1, 101)}


def test_a_revoked_kafka_partition_takes_its_logical_partitions_with_it() -> None:
    store = LayoutStore(replays=True)
    transport, clock = LayoutTransport(), FakeClock()
    owner = layout_owner(store, transport, clock)
    owner.assigned([0, 1])
    transport.inbox.extend(jobs_in_every_logical_partition())
    owner.cycle()
    owner.revoked([1])
    assert owner.owned == frozenset({0, 2, 4, 6}) and owner.epochs == {0: 100}
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    fired = {logical(str(o.record["job_id"])) for t in transport.transactions for o in t
             if o.name == "RunScheduled"}
    assert fired == {0, 2, 4, 6}, "only the jobs of the logical partitions still owned"
    assert store.asked[-1] == frozenset({0, 2, 4, 6})
    assert owner.in_flight_by_tenant() == Counter({"t": 4})
    # Taken again: new epochs for all four, the runs in flight of all eight known again.
    owner.assigned([1])
    assert store.taken[-1] == [1, 3, 5, 7] and owner.owned == frozenset(range(8))
    assert owner.in_flight_by_tenant() == Counter({"t": 4}), \
        "logical partitions 1, 3, 5, 7 have nothing in flight yet"
