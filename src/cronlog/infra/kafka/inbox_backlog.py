"""InboxBacklog: the inbox messages an owner has read but not decided yet.

Two kinds, both kept per partition as whole Kafka messages in offset order (a WorkerReports
or CommandBatch message stands for several, which share its offset and stay together):
those of a partition whose owner is still catching up (held until released), and those a
cycle did not decide (its budget or a tenant's share left them: put back). The transport
hands them out again before anything new of their partition, and commits a partition's
position at its first kept message, so a crash reads them again. Plain data, no Kafka
client: tested without a broker.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from cronlog.ports import InboundMessage

# One Kafka message's worth: a single message, or the reports or commands it carries.
Entry = list[InboundMessage]


class InboxBacklog:
    def __init__(self) -> None:
        self._held: set[int] = set()
        self._kept: dict[int, list[Entry]] = {}

    def hold(self, partitions: Iterable[int]) -> None:
        self._held.update(partitions)

    def release(self, partitions: Iterable[int]) -> None:
        self._held.difference_update(partitions)

    def keeps(self, partition: int) -> bool:
        """Whether a message newly read from `partition` must wait behind others (held, or
        behind messages kept earlier), so each partition stays in order."""
        return partition in self._held or partition in self._kept

    def keep(self, partition: int, entry: Entry) -> None:
        """A newly read Kafka message's worth, behind what the partition has kept."""
        self._kept.setdefault(partition, []).append(entry)

    def put_back(self, messages: Sequence[InboundMessage], assigned: Collection[int]) -> None:
        """Messages the owner did not decide, in the order polled: in front of anything kept
        since. Those of partitions no longer assigned are dropped: their next owner reads
        them from the committed position."""
        back: dict[int, list[Entry]] = {}
        for message in messages:
            if message.partition not in assigned:
                continue
            entries = back.setdefault(message.partition, [])
            if entries and entries[-1][0].offset == message.offset:
                entries[-1].append(message)
            else:
                entries.append([message])
        for partition, entries in back.items():
            self._kept[partition] = entries + self._kept.get(partition, [])

    def take(self, most: int) -> list[InboundMessage]:
        """About `most` kept messages of partitions not held, whole Kafka messages each."""
        taken: list[InboundMessage] = []
        for partition in [p for p in self._kept if p not in self._held]:
            kept = self._kept[partition]
            while kept and len(taken) < most:
                taken.extend(kept.pop(0))
            if not kept:
                del self._kept[partition]
        return taken

    def first_offset(self, partition: int) -> int | None:
        """The offset of the partition's first kept message, if any: where its committed
        position must stay."""
        kept = self._kept.get(partition)
        return kept[0][0].offset if kept else None

    def forget(self, partitions: Iterable[int]) -> None:
        """Partitions no longer this owner's."""
        for partition in partitions:
            self._held.discard(partition)
            self._kept.pop(partition, None)

    def clear_kept(self) -> None:
        """After a rewind: what was kept is read again from the committed offsets."""
        self._kept.clear()
