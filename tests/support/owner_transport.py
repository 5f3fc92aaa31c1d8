"""In-memory owner transports: one reads an inbox list and keeps every transaction's
outgoing messages, in order; one also commits each partition's inbox position with each
transaction, as the Kafka transport does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cronlog.commands.owner.ports import Outgoing, Produced
from cronlog.ports import InboundMessage


@dataclass
class FakeTransport:
    inbox: list[InboundMessage] = field(default_factory=list)
    transactions: list[list[Outgoing]] = field(default_factory=list)
    offset: int = 0

    rewinds: int = 0
    held: set[int] = field(default_factory=set)

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        batch, self.inbox = self.inbox[:max_messages], self.inbox[max_messages:]
        return batch

    def rewind(self) -> None:
        self.rewinds += 1

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset({0})

    @property
    def group_member(self) -> str:
        return "member-1"

    def hold(self, partitions: Sequence[int]) -> None:
        self.held = set(partitions)

    def release(self, partitions: Sequence[int]) -> None:
        self.held = set()

    def put_back(self, messages: Sequence[InboundMessage]) -> None:
        self.inbox[:0] = messages

    def transact(self, outgoing: Sequence[Outgoing]) -> Sequence[Produced]:
        self.transactions.append(list(outgoing))
        produced = []
        for out in outgoing:
            produced.append(Produced(out.topic, 0, self.offset, out.name, out.record, b""))
            self.offset += 1
        return produced


def outgoing(transport: FakeTransport, name: str) -> list[Outgoing]:
    return [o for o in transport.transactions[-1] if o.name == name]


@dataclass
class KafkaLikeTransport(FakeTransport):
    """Hands the inbox out as a consumer would and commits, with each transaction, each
    partition's position as the Kafka transport does: its first message not decided yet
    (put back, or never polled)."""

    polled: list[list[InboundMessage]] = field(default_factory=list)
    committed: list[dict[int, int]] = field(default_factory=list)
    next_offset: dict[int, int] = field(default_factory=dict)

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        batch = super().poll(timeout, max_messages)
        self.polled.append(list(batch))
        for m in batch:
            self.next_offset[m.partition] = max(self.next_offset.get(m.partition, 0),
                                                m.offset + 1)
        return batch

    def transact(self, outgoing: Sequence[Outgoing]) -> Sequence[Produced]:
        self.committed.append({
            p: min([m.offset for m in self.inbox if m.partition == p] or [after])
            for p, after in self.next_offset.items()})
        return super().transact(outgoing)


def created(transaction: list[Outgoing]) -> list[str]:
    """The request ids whose JobCreated a transaction carries, in its order."""
    return [str(o.record["request_id"]) for o in transaction if o.name == "JobRequestApplied"]
