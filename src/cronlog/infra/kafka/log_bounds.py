"""The bounds of many partitions' logs in one request per broker."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    OffsetSpec,
)

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config, consumer_config
from cronlog.ports import LogUnavailable

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]

# A batched ListOffsets of 1,024 partitions answers in about 0.02 s (docs/benchmarks.md,
# "Takeover"). After a leader change librdkafka's admin client keeps sending it with the
# leader epoch it had cached and retries FENCED_LEADER_EPOCH until the request times out:
# at 10 s a resync after the controller was killed spent 20 s on two such requests (chaos
# cluster-failover). So the request is given little time, and asked once more of a new
# client, which starts from fresh metadata.
BATCH_TIMEOUT = 2.5
BATCH_ATTEMPTS = 2
# Then one partition at a time through a new consumer (fresh metadata too; its offset
# queries follow a leader change), each call bounded, and all of them together: while a
# new 1,024-partition topic had no leaders yet, each call waited out its 3 s, and an owner
# asking for 512 partitions stopped polling its group for minutes, passed the group's
# max.poll.interval and was left without partitions (bench, 5 December). The caller asks
# again later, polling in between.
ONE_TIMEOUT = 3.0
# Offsets by time are asked by verify, what-if and their RPCs, never by an owner's cycle:
# they may wait longer, and are asked again of a new client (a starved test machine once
# timed out the first request of a verify).
AT_TIMEOUT = 10.0
AT_ATTEMPTS = 3
ONE_BY_ONE_BUDGET = 15.0
# A just-created topic's partitions answer NOT_LEADER_FOR_PARTITION until the broker has
# their leader (a clean-clone CI run met it in an owner's catch-up and failed).
LEADER_NOT_KNOWN = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION,
                              KafkaError.LEADER_NOT_AVAILABLE,
                              KafkaError.UNKNOWN_TOPIC_OR_PART})
LEADER_RETRY = 0.2


class LogBounds:
    """Asked one by one, each partition is a round trip, which at a thousand partitions is
    most of a takeover (docs/benchmarks.md, "Takeover"); this asks for all at once."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._config = admin_config(settings)
        self._admin: AdminClient | None = None

    def of(self, keys: list[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """(first offset, last stable offset) of each partition. Raises KafkaException."""
        if not keys:
            return {}
        failure: KafkaException | None = None
        for _ in range(BATCH_ATTEMPTS):
            if self._admin is None:
                self._admin = AdminClient(self._config)
            try:
                return _bounds(self._admin, keys)
            except KafkaException as exc:
                # The client's leader epochs may be stale (a broker restarted or a leader
                # moved): the next call starts from fresh metadata.
                self._admin = None
                failure = exc
        began = time.monotonic()
        log.warning("log bounds of %d partitions in one request failed (%s); asking one "
                    "by one", len(keys), failure)
        found = self._one_by_one(keys)
        log.info("log bounds of %d partitions one by one in %.2fs", len(keys),
                 time.monotonic() - began)
        return found

    def at(self, keys: list[TopicPartitionKey], instant: datetime
           ) -> dict[TopicPartitionKey, int]:
        """Each partition's first offset written at `instant` or later (by the records'
        timestamps), or its last stable offset when none is. Asked up to AT_ATTEMPTS
        times, each of a new client; then LogUnavailable."""
        if not keys:
            return {}
        failure: KafkaException | None = None
        for _ in range(AT_ATTEMPTS):
            try:
                return self._at(keys, instant)
            except KafkaException as exc:
                self._admin = None  # fresh metadata for the next attempt
                failure = exc
        raise LogUnavailable(f"the offsets of {len(keys)} partitions at "
                             f"{instant.isoformat()}: {failure}")

    def _at(self, keys: list[TopicPartitionKey], instant: datetime
            ) -> dict[TopicPartitionKey, int]:
        if self._admin is None:
            self._admin = AdminClient(self._config)
        millis = int(instant.timestamp() * 1000)
        spec = OffsetSpec.for_timestamp(millis)
        answers = self._admin.list_offsets({TopicPartition(t, p): spec for t, p in keys},
                                           isolation_level=IsolationLevel.READ_COMMITTED,
                                           request_timeout=AT_TIMEOUT)
        found: dict[TopicPartitionKey, int] = {}
        for tp, future in answers.items():
            try:
                found[(tp.topic, tp.partition)] = int(future.result(
                    timeout=AT_TIMEOUT + 2).offset)
            except FutureTimeout:
                raise KafkaException(KafkaError(
                    KafkaError._TIMED_OUT, f"no offset of {tp.topic}[{tp.partition}] at "
                                           f"{instant.isoformat()}")) from None
        ends = self.of([key for key, offset in found.items() if offset < 0])
        return {key: ends[key][1] if offset < 0 else offset for key, offset in found.items()}

    def _one_by_one(self, keys: list[TopicPartitionKey]
                    ) -> dict[TopicPartitionKey, tuple[int, int]]:
        # read_committed (consumer_config): the high offset is the last stable offset.
        consumer = Consumer(consumer_config(self._settings, None))
        try:
            return bounds_one_by_one(consumer.get_watermark_offsets, keys,
                                     leader_retry=LEADER_RETRY)
        finally:
            consumer.close()


def bounds_one_by_one(ask: Callable[..., tuple[int, int] | None],
                      keys: list[TopicPartitionKey], budget: float = ONE_BY_ONE_BUDGET,
                      clock: Callable[[], float] = time.monotonic,
                      leader_retry: float | None = None,
                      sleep: Callable[[float], None] = time.sleep
                      ) -> dict[TopicPartitionKey, tuple[int, int]]:
    """Asks `ask` (a consumer's get_watermark_offsets) for each partition in turn; raises
    KafkaException once `budget` seconds have gone, whatever is left. With leader_retry, a
    partition whose leader the broker does not know yet (a topic just created, a leader
    moving) is asked again that many seconds later, within the same budget; without it
    (a caller on an owner's loop, which must not wait), the first error is raised."""
    deadline = clock() + budget
    found: dict[TopicPartitionKey, tuple[int, int]] = {}
    for key in keys:
        while True:
            left = deadline - clock()
            if left <= 0:
                raise KafkaException(KafkaError(
                    KafkaError._TIMED_OUT, f"log bounds: {len(found)} of {len(keys)} "
                                           f"partitions answered within {budget:.0f} s"))
            try:
                found[key] = _pair(ask(TopicPartition(*key), timeout=min(ONE_TIMEOUT, left),
                                       cached=False))
                break
            except KafkaException as exc:
                if leader_retry is None or exc.args[0].code() not in LEADER_NOT_KNOWN:
                    raise
                sleep(min(leader_retry, max(0.0, deadline - clock())))
    return found


def _pair(offsets: tuple[int, int] | None) -> tuple[int, int]:
    if offsets is None:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                        "no answer for a partition's offsets"))
    low, high = offsets
    return int(low), int(high)


def _bounds(admin: AdminClient, keys: list[TopicPartitionKey]
            ) -> dict[TopicPartitionKey, tuple[int, int]]:
    wanted = [TopicPartition(t, p) for t, p in keys]
    bounds: dict[TopicPartitionKey, list[int]] = {}
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):  # type: ignore[no-untyped-call]
        answers = admin.list_offsets({tp: spec for tp in wanted},
                                     isolation_level=IsolationLevel.READ_COMMITTED,
                                     request_timeout=BATCH_TIMEOUT)
        for tp, future in answers.items():
            try:
                offset = future.result(timeout=BATCH_TIMEOUT + 2).offset
            except FutureTimeout:
                raise KafkaException(KafkaError(
                    KafkaError._TIMED_OUT, f"no offsets of {tp.topic}[{tp.partition}]")
                ) from None
            bounds.setdefault((tp.topic, tp.partition), []).append(int(offset))
    return {key: (low, high) for key, (low, high) in bounds.items()}
