"""The workers topic (compacted, one partition, keyed by worker id): workers announce
themselves on it (KafkaAnnouncements) and every api reads it whole into a LiveWorkers
(KafkaWorkerDirectory); docs/workers.md."""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition

from cronlog.domain.catalogue import Fleet
from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.fleet.live_workers import LiveWorkers
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config, producer_config
from cronlog.infra.kafka.messages import MessageDecoder, MessageEncoder
from cronlog.ports import Clock

log = logging.getLogger(__name__)

# How long a clean stop waits for its withdrawal to reach the broker.
WITHDRAW_WITHIN = 5.0
# Messages read at a time; the topic holds one record per worker after compaction.
READ_BATCH = 500


def announcement_record(a: WorkerAnnouncement) -> dict[str, Any]:
    return {"worker_id": a.worker_id, "host": a.host, "queues": list(a.queues),
            "handlers": list(a.handlers), "slots": a.slots, "slots_in_use": a.slots_in_use,
            "version": a.version, "at": a.at}


def announcement_of(record: dict[str, Any]) -> WorkerAnnouncement:
    return WorkerAnnouncement(
        worker_id=record["worker_id"], host=record["host"], queues=tuple(record["queues"]),
        handlers=tuple(record["handlers"]), slots=record["slots"],
        slots_in_use=record["slots_in_use"], version=record["version"], at=record["at"])


class KafkaAnnouncements:
    """A worker's announcements (fleet/announcer.py's Announcements)."""

    def __init__(self, settings: Settings, encoder: MessageEncoder) -> None:
        self._topic = settings.workers_topic
        self._encoder = encoder
        self._producer = Producer(producer_config(settings))

    def announce(self, announcement: WorkerAnnouncement) -> None:
        self._producer.produce(self._topic, key=announcement.worker_id.encode(),
                               value=self._encoder.encode(Fleet.WORKER_ANNOUNCED,
                                                          announcement_record(announcement)))
        self._producer.poll(0)

    def withdraw(self, worker_id: str) -> None:
        # A tombstone: the apis forget the worker now, and compaction removes its record.
        self._producer.produce(self._topic, key=worker_id.encode(), value=None)
        self._producer.flush(WITHDRAW_WITHIN)


class KafkaWorkerDirectory:
    """Reads the workers topic from its beginning on a thread of its own, into `workers`;
    no consumer group and no committed offsets: every api reads the whole of it."""

    def __init__(self, settings: Settings, decoder: MessageDecoder, workers: LiveWorkers,
                 clock: Clock) -> None:
        self.workers = workers
        self._decoder = decoder
        self._clock = clock
        self._consumer = Consumer(consumer_config(settings, None,
                                                  **{"enable.partition.eof": True}))
        self._consumer.assign([TopicPartition(settings.workers_topic, 0, OFFSET_BEGINNING)])
        self._caught_up = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="worker-directory", daemon=True)

    @property
    def caught_up(self) -> bool:
        """True once the topic was read to its end: before, an absent worker may only be
        unread yet."""
        return self._caught_up.is_set()

    def live(self) -> list[WorkerAnnouncement]:
        return self.workers.live(self._clock.now())

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._consumer.close()

    def _read(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(num_messages=READ_BATCH, timeout=0.5):
                self._take(message)

    def _take(self, message: Message) -> None:
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self._caught_up.set()
            else:
                log.warning("reading the workers topic: %s", error)
            return
        value = message.value()
        key = (message.key() or b"").decode(errors="replace")
        if value is None:
            self.workers.withdraw(key)
            return
        # One unreadable record is skipped, not fatal: the list is advice (invariant 9).
        try:
            name, record = self._decoder.decode(value)
            if name != Fleet.WORKER_ANNOUNCED:
                raise ValueError(f"a {name} record")
            announcement = announcement_of(record)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("workers topic offset %s skipped: %s", message.offset(), exc)
            return
        self.workers.record(announcement, self._clock.now())
