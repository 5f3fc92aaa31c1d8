"""librdkafka's statistics (`statistics.interval.ms`, delivered through `stats_cb`), the
numbers of them an operator watches: consumer lag per topic, brokers connected, messages
queued in the client, the slowest broker's round trip.

The callback runs inside the client's poll, on the role's own loop: it only keeps the text
and when it came. Parsing waits for a scrape or a readiness check, and happens once per
statistics message however often those ask."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from cronlog.infra.observability.catalogue import (
    KAFKA_BROKER_RTT,
    KAFKA_BROKERS_UP,
    KAFKA_CONSUMER_LAG,
    KAFKA_QUEUED_MESSAGES,
)
from cronlog.infra.observability.registry import gauge_family

# How often librdkafka sends its statistics: every client that is observed gets this.
STATISTICS_INTERVAL_MS = 5000
# Statistics older than this mean the client's poll has not run (the loop stuck) or the
# client is gone: its numbers are no longer told, and readiness says so.
STALE_AFTER = 3 * STATISTICS_INTERVAL_MS / 1000


@dataclass(frozen=True)
class KafkaClientStats:
    brokers_up: int
    queued_messages: int
    slowest_rtt_seconds: float
    # Summed over the partitions this client is assigned and knows a lag for.
    consumer_lag: Mapping[str, int] = field(default_factory=dict)
    # Messages past the client's position (what it has read), summed like consumer_lag.
    # consumer_lag counts from the committed offset, and an application that commits past
    # the last message it read (offset + 1) stays one behind each transaction marker for
    # good; the position moves past markers, so this reaches 0 once all is read.
    unconsumed: Mapping[str, int] = field(default_factory=dict)


def kafka_problem(stats: KafkaClientStats | None, loop: str = "the loop") -> str | None:
    """Why a client's Kafka side is not ready, or None: no statistics lately (its process
    starting, Kafka unreachable, or `loop`, which polls it, stuck), or no broker up."""
    if stats is None:
        return (f"no Kafka statistics within {STALE_AFTER:.0f} s (starting, "
                f"Kafka unreachable, or {loop} stuck)")
    if stats.brokers_up == 0:
        return "no Kafka broker reachable"
    return None


def parse_statistics(text: str) -> KafkaClientStats:
    doc: dict[str, Any] = json.loads(text)
    up = 0
    slowest = 0.0
    for broker in doc.get("brokers", {}).values():
        # Bootstrap entries (nodeid -1) stand for addresses, not brokers.
        if broker.get("nodeid", -1) < 0 or broker.get("state") != "UP":
            continue
        up += 1
        slowest = max(slowest, broker.get("rtt", {}).get("avg", 0) / 1_000_000)
    lag: dict[str, int] = {}
    unconsumed: dict[str, int] = {}
    for topic, body in doc.get("topics", {}).items():
        for number, partition in body.get("partitions", {}).items():
            # -1 is librdkafka's partition for messages not yet given one.
            if number == "-1" or partition.get("fetch_state", "none") == "none":
                continue
            left = _unconsumed(partition)
            # A client that never commits (the api's reply reader) has no committed lag:
            # what it has not read yet is its lag.
            partition_lag = partition.get("consumer_lag", -1)
            if partition_lag < 0 and left is not None:
                partition_lag = left
            if partition_lag >= 0:
                lag[topic] = lag.get(topic, 0) + int(partition_lag)
            if left is not None:
                unconsumed[topic] = unconsumed.get(topic, 0) + left
    return KafkaClientStats(up, int(doc.get("msg_cnt", 0)), slowest, lag, unconsumed)


def _unconsumed(partition: Mapping[str, Any]) -> int | None:
    # The last stable offset is the end a read_committed consumer can reach.
    end = int(partition.get("ls_offset", -1))
    if end < 0:
        return None
    # Before the first message is read: from the committed offset, or (nothing committed,
    # auto.offset.reset=earliest) from the log's start.
    for key in ("app_offset", "committed_offset", "lo_offset"):
        position = int(partition.get(key, -1))
        if position >= 0:
            return max(0, end - position)
    return None


class _Latest:
    def __init__(self) -> None:
        self.text: str | None = None
        self.received = 0.0
        self.parsed: KafkaClientStats | None = None
        self.parsed_text: str | None = None


class KafkaStatistics:
    """The latest statistics of each observed Kafka client of a role, by the client's name
    (`dispatch.default`, `inbox`, ...); a prometheus-client collector of them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._clients: dict[str, _Latest] = {}

    def listener(self, client: str) -> Callable[[str], None]:
        """The `stats_cb` for one client."""
        latest = self._clients.setdefault(client, _Latest())

        def received(text: str) -> None:
            latest.text, latest.received = text, self._clock()
        return received

    def latest(self, client: str) -> KafkaClientStats | None:
        """The client's statistics, None before the first or once they are stale."""
        latest = self._clients.get(client)
        if latest is None:
            return None
        text, received = latest.text, latest.received
        if text is None or self._clock() - received > STALE_AFTER:
            return None
        with self._lock:
            if latest.parsed_text is not text:
                latest.parsed, latest.parsed_text = parse_statistics(text), text
            return latest.parsed

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = {name: self.latest(name) for name in list(self._clients)}
        told = {name: s for name, s in now.items() if s is not None}
        yield gauge_family(KAFKA_BROKERS_UP, [((n,), s.brokers_up) for n, s in told.items()])
        yield gauge_family(KAFKA_QUEUED_MESSAGES,
                           [((n,), s.queued_messages) for n, s in told.items()])
        yield gauge_family(KAFKA_BROKER_RTT,
                           [((n,), s.slowest_rtt_seconds) for n, s in told.items()])
        yield gauge_family(KAFKA_CONSUMER_LAG,
                           [((n, topic), lag) for n, s in told.items()
                            for topic, lag in s.consumer_lag.items()])
