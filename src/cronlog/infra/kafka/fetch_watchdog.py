"""StalledFetchWatchdog: finds assigned partitions whose messages never reach the
application, and assigns them again.

After a broker or coordinator restart, a partition whose committed offset was asked of a
coordinator that had just moved can wait for an answer that never comes, and is then never
fetched (librdkafka issue 5586). For the owners that would strand worker reports, for the
workers dispatches, for the projector history.

A partition counts as stalled only when, at two checks in a row, the application has
consumed nothing from it since it was assigned (its position is unset) although the
broker's log goes on past its committed offset. A partition that is being read is never
touched: assigning a partition again rewinds it to its committed offset, which for a
worker would start again what it started since its last commit. What lies past the
committed offset may be only transaction markers, which are never delivered: a partition
assigned again at an offset is not assigned again at that same offset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, TopicPartition

from cronlog.infra.kafka.log_bounds import LogBounds, bounds_one_by_one

log = logging.getLogger(__name__)

CHECK_SECONDS = 10.0
CALL_TIMEOUT = 5.0


class StalledFetchWatchdog:
    def __init__(self, consumer: Consumer, every: float = CHECK_SECONDS,
                 clock: Callable[[], float] = time.monotonic,
                 bounds: LogBounds | None = None) -> None:
        self._consumer = consumer
        # For the log bounds of many partitions at once (a new group has no committed
        # offsets at all); without it, or when it fails, one request per partition.
        self._log_bounds = bounds
        self._every = every
        self._clock = clock
        self._next_check = clock() + every
        # Partitions that looked stalled at the previous check.
        self._suspects: set[tuple[str, int]] = set()
        # The offset each partition was last assigned again at.
        self._reassigned: dict[tuple[str, int], int] = {}

    def check(self) -> list[tuple[str, int]]:
        """Cheap between checks; returns the partitions it assigned again."""
        now = self._clock()
        if now < self._next_check:
            return []
        self._next_check = now + self._every
        try:
            unread = [tp for tp in self._consumer.position(self._consumer.assignment())
                      if tp.offset < 0]
            waiting = self._waiting(unread)
        except KafkaException as exc:
            log.debug("fetch check skipped: %s", exc)
            return []
        stalled = [tp for tp in waiting if (tp.topic, tp.partition) in self._suspects]
        self._suspects = {(tp.topic, tp.partition) for tp in waiting} - {
            (tp.topic, tp.partition) for tp in stalled}
        if not stalled:
            return []
        keys = [(tp.topic, tp.partition) for tp in stalled]
        try:
            assign_again(self._consumer, stalled)
        except KafkaException as exc:
            log.warning("partitions %s are not being read and could not be assigned again "
                        "yet: %s", keys, exc)
            return []
        for tp in stalled:
            self._reassigned[(tp.topic, tp.partition)] = tp.offset
        log.warning("partitions %s were not being read; assigned them again at %s", keys,
                    [tp.offset for tp in stalled])
        return keys

    def _waiting(self, unread: list[TopicPartition]) -> list[TopicPartition]:
        """Those of `unread` with messages past their committed offset, each at the offset
        to read from."""
        if not unread:
            return []
        committed = self._consumer.committed(
            [TopicPartition(tp.topic, tp.partition) for tp in unread], timeout=CALL_TIMEOUT)
        # A fetching partition knows its log end from its fetch replies; only those that
        # never had a reply (or have no committed offset) cost a request to the broker.
        cached = {(tp.topic, tp.partition): self._consumer.get_watermark_offsets(
            TopicPartition(tp.topic, tp.partition), cached=True) for tp in committed}
        asked = [(tp.topic, tp.partition) for tp in committed
                 if tp.offset < 0 or cached[(tp.topic, tp.partition)][1] < 0]
        fresh = self._bounds(asked)
        unknown = set(asked) - set(fresh)
        waiting = []
        for tp in committed:
            key = (tp.topic, tp.partition)
            if key in unknown:
                continue
            start = tp.offset
            high = cached[key][1]
            if key in fresh:
                low, high = fresh[key]
                start = start if start >= 0 else low
            if start < high and self._reassigned.get(key) != start:
                waiting.append(TopicPartition(tp.topic, tp.partition, start))
        return waiting

    def _bounds(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """The log bounds of `keys`, or none when they cannot be had now: a partition
        whose bounds are unknown is not taken for stalled, and the next check asks again.
        Asked one by one without a bound on the whole, 512 partitions of a new topic that
        had no leaders yet kept an owner from polling for minutes, past its group's
        max.poll.interval (bench, 5 December)."""
        if not keys:
            return {}
        try:
            if self._log_bounds is not None:
                return self._log_bounds.of(keys)
            return bounds_one_by_one(self._consumer.get_watermark_offsets, keys)
        except KafkaException as exc:
            log.info("log bounds of %d partitions not known now (%s); checking them again "
                     "at the next check", len(keys), exc)
            return {}


def assign_again(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    """Drops the partitions from the consumer's assignment and assigns them again at the
    given offsets: an explicit offset needs no committed-offset answer to start fetching."""
    consumer.incremental_unassign([TopicPartition(tp.topic, tp.partition) for tp in partitions])
    consumer.incremental_assign(partitions)
