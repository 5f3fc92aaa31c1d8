"""KafkaEventReplay: reads one partition of an event topic up to its last stable offset."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.log_bounds import LogBounds
from cronlog.infra.kafka.log_gaps import LogGap, LogGapError
from cronlog.infra.kafka.messages import MessageDecoder, inbound_or_unreadable
from cronlog.ports import UNREADABLE, InboundMessage, LogUnavailable

log = logging.getLogger(__name__)

STALL_TIMEOUT = 15.0


TopicPartitionKey = tuple[str, int]


class KafkaEventReplay:
    def __init__(self, settings: Settings, decoder: MessageDecoder) -> None:
        self._settings = settings
        self._decoder = decoder
        self._bounds = LogBounds(settings)

    def read(self, topic: str, partition: int, from_offset: int,
             batch: int = 1000, whole: bool = False) -> Iterator[list[InboundMessage]]:
        """Yields batches of committed messages from from_offset up to the end as of now."""
        for _, _, messages in self.read_many({(topic, partition): from_offset}, batch, whole):
            yield messages

    def read_many(self, starts: Mapping[TopicPartitionKey, int], batch: int = 1000,
                  whole: bool = False) -> Iterator[tuple[str, int, list[InboundMessage]]]:
        """Yields (topic, partition, batch) of committed messages of every partition in
        `starts`, each from its offset up to its end as of now, in offset order per
        partition; one consumer reads them all at once. `whole`: raise LogGapError when
        the log no longer holds a start offset, instead of starting at its first offset
        held (replay and audit: log_gaps.py)."""
        reader = self.reader(starts, batch, whole)
        try:
            while not reader.finished:
                batches, _done = reader.step()
                yield from batches
        finally:
            reader.close()

    def reader(self, starts: Mapping[TopicPartitionKey, int],
               batch: int = 1000, whole: bool = False) -> LogReader:
        return LogReader(self._settings, self._decoder, starts, self._bounds, batch, whole)


class LogReader:
    """Reads partitions of topics, each from its offset up to its end as of the start,
    through one consumer, a round of fetching at a time: a caller can stop between rounds
    (an owner fires the partitions already caught up while the others go on)."""

    def __init__(self, settings: Settings, decoder: MessageDecoder,
                 starts: Mapping[TopicPartitionKey, int], bounds: LogBounds,
                 batch: int = 1000, whole: bool = False) -> None:
        self._decoder = decoder
        self._batch = batch
        self._closed = False
        self._described = sorted(starts)[:3]
        self._consumer = Consumer(consumer_config(settings, None,
                                                  **{"enable.partition.eof": True}))
        # With read_committed the high watermark is the last stable offset: everything
        # before it is decided, so the replay neither waits for nor sees open transactions.
        self._ends: dict[TopicPartitionKey, int] = {}
        # Read to their end, not reported by step() yet.
        self._unreported: set[TopicPartitionKey] = set()
        assignment: list[TopicPartition] = []
        try:
            # One request, or one partition at a time if that fails (log_bounds.py).
            found = bounds.of(list(starts))
            gaps = [LogGap(t, p, offset, found[(t, p)][0], None)
                    for (t, p), offset in starts.items() if offset < found[(t, p)][0]]
            if whole and gaps:
                raise LogGapError(gaps)
            for (topic, partition), from_offset in starts.items():
                low, high = found[(topic, partition)]
                start = max(from_offset, low)
                if start < high:
                    self._ends[(topic, partition)] = high
                    assignment.append(TopicPartition(topic, partition, start))
                else:
                    self._unreported.add((topic, partition))
            if assignment:
                self._consumer.assign(assignment)
        except KafkaException as exc:
            self.close()
            raise LogUnavailable(f"reading {self._described}...: {exc}") from exc
        except LogGapError:
            self.close()
            raise
        self._last_progress = time.monotonic()

    @property
    def finished(self) -> bool:
        return not self._ends and not self._unreported

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._consumer.close()

    def step(self) -> tuple[list[tuple[str, int, list[InboundMessage]]],
                            set[TopicPartitionKey]]:
        """One round: the batches read, and the partitions read to their end since the
        last step (reported once each, after their last batch)."""
        try:
            batches = self._round() if self._ends else []
        except KafkaException as exc:
            raise LogUnavailable(f"reading {self._described}...: {exc}") from exc
        done, self._unreported = self._unreported, set()
        return batches, done

    def _round(self) -> list[tuple[str, int, list[InboundMessage]]]:
        ends = self._ends
        # Short waits: a partition's last offset is often a transaction marker, which is
        # never delivered, so a long wait here was a whole timeout per topic and partition
        # (docs/benchmarks.md, "Takeover").
        messages = self._consumer.consume(num_messages=self._batch, timeout=0.05)
        if messages:
            self._last_progress = time.monotonic()
        elif time.monotonic() - self._last_progress > STALL_TIMEOUT:
            raise LogUnavailable(f"reading {sorted(ends)[:3]}: no progress for "
                                 f"{STALL_TIMEOUT:.0f}s")
        out: dict[TopicPartitionKey, list[InboundMessage]] = {}
        done: set[TopicPartitionKey] = set()
        for m in messages:
            key = (str(m.topic()), int(m.partition() or 0))
            if key not in ends:
                continue
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done.add(key)
                    continue
                # A catch-up must be complete: stopping early could fire twice.
                raise LogUnavailable(f"reading {key[0]}[{key[1]}]: {error}")
            if (m.offset() or 0) >= ends[key]:
                done.add(key)
                continue
            decoded = inbound_or_unreadable(m, self._decoder)
            if decoded is not None and decoded.name == UNREADABLE:
                # Not written by an owner (theirs always decode): no state derives from
                # it, and a takeover must not stop on it (DESIGN invariant 9).
                log.error("skipping unreadable message %s[%d]@%d: %s", key[0], key[1],
                          decoded.offset, decoded.record.get("error"))
            elif decoded is not None:
                out.setdefault(key, []).append(decoded)
        remaining = [TopicPartition(t, p) for t, p in ends if (t, p) not in done]
        if remaining:
            for position in self._consumer.position(remaining):
                if position.offset >= ends[(position.topic, position.partition)]:
                    done.add((position.topic, position.partition))
        for key in done:
            ends.pop(key, None)
        self._unreported |= done
        if done and ends:
            # Read to their end: no more fetches for them while the others finish.
            self._consumer.pause([TopicPartition(t, p) for t, p in done])
        return [(topic, partition, found) for (topic, partition), found in out.items()]
