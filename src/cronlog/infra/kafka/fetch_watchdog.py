"""StalledFetchWatchdog: finds assigned partitions that never started fetching, and
assigns them again.

After a broker or coordinator restart, a partition whose committed offset was asked of a
coordinator that had just moved can wait for an answer that never comes, and is then never
fetched (librdkafka issue 5586). For the owners that would strand worker reports, for the
workers dispatches, for the projector history. A partition that is fetching has watermarks
cached from its fetch replies (an idle one too); one without them long after it was
assigned is assigned again at its committed offset, which needs no such answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

log = logging.getLogger(__name__)

CHECK_SECONDS = 10.0
CALL_TIMEOUT = 10.0


class StalledFetchWatchdog:
    def __init__(self, consumer: Consumer, every: float = CHECK_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._consumer = consumer
        self._every = every
        self._clock = clock
        self._next_check = clock() + every
        # When each assigned partition was first seen assigned (or last assigned again).
        self._since: dict[tuple[str, int], float] = {}

    def check(self) -> list[tuple[str, int]]:
        """Cheap between checks; returns the partitions it assigned again."""
        now = self._clock()
        if now < self._next_check:
            return []
        self._next_check = now + self._every
        try:
            current = {(tp.topic, tp.partition) for tp in self._consumer.assignment()}
        except KafkaException:
            return []
        self._since = {key: self._since.get(key, now) for key in current}
        stalled = [key for key, since in self._since.items()
                   if now - since >= self._every and not self._fetching(*key)]
        if not stalled:
            return []
        try:
            committed = self._consumer.committed(
                [TopicPartition(t, p) for t, p in stalled], timeout=CALL_TIMEOUT)
            self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in stalled])
            self._consumer.incremental_assign([
                TopicPartition(tp.topic, tp.partition,
                               tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                for tp in committed])
        except KafkaException as exc:
            log.warning("partitions %s are not fetching and could not be assigned again yet: "
                        "%s", stalled, exc)
            return []
        log.warning("partitions %s were not fetching; assigned them again", stalled)
        for key in stalled:
            self._since[key] = now
        return stalled

    def _fetching(self, topic: str, partition: int) -> bool:
        try:
            _low, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                              cached=True)
        except KafkaException:
            return True  # not known either way: leave it be
        return bool(high >= 0)
