"""Worker announcements through a real broker: the workers topic as provisioned, a worker's
announcement read back by an api's directory, an unreadable record skipped, and a clean
stop's tombstone removing the worker (docs/workers.md)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from confluent_kafka import Producer

from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.fleet.live_workers import LiveWorkers
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.kafka.topic_specs import topic_specs
from cronlog.infra.kafka.topics import ensure_topics
from cronlog.infra.kafka.worker_announcements import KafkaAnnouncements, KafkaWorkerDirectory
from cronlog.infra.system_clock import SystemClock
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration


def _workers_topic(settings: Settings) -> None:
    [spec] = [s for s in topic_specs(settings) if s.kind == "workers"]
    ensure_topics(settings, [spec])
    # Provisioned again, nothing differs: compact,delete and its segments are as specified.
    assert ensure_topics(settings, [spec]) == []


def _directory(settings: Settings) -> KafkaWorkerDirectory:
    directory = KafkaWorkerDirectory(settings, AvroCodec(), LiveWorkers(), SystemClock())
    directory.start()
    return directory


def test_an_announcement_reaches_the_directory_and_a_tombstone_removes_it(
        isolated: Settings) -> None:
    _workers_topic(isolated)
    codec = AvroCodec()
    out = KafkaAnnouncements(isolated, codec)
    worker = WorkerAnnouncement("w-1", "host-1", ("default",), ("backup", "echo"), 16, 2,
                                "1.0", datetime.now(UTC))
    out.announce(worker)
    # Whatever else reaches the topic is skipped, not fatal to the reader.
    garbage = Producer({"bootstrap.servers": isolated.kafka_bootstrap})
    garbage.produce(isolated.workers_topic, key=b"junk", value=b"not avro")
    garbage.flush(30)
    out.announce(replace(worker, worker_id="w-2", handlers=("echo",)))
    out.withdraw("nobody")  # flushes the announcements before it

    directory = _directory(isolated)
    try:
        wait_for(lambda: directory.caught_up, 30, "the directory reading the topic to its end")
        assert [a.worker_id for a in directory.live()] == ["w-1", "w-2"]
        [first] = [a for a in directory.live() if a.worker_id == "w-1"]
        assert first.handlers == ("backup", "echo") and first.queues == ("default",)
        assert (first.slots, first.slots_in_use, first.host) == (16, 2, "host-1")
        # Read while running: a worker that stops cleanly leaves the list at once.
        out.withdraw("w-1")
        wait_for(lambda: [a.worker_id for a in directory.live()] == ["w-2"], 30,
                 "the tombstone read")
    finally:
        directory.close()
    # An api started later reads the same: the withdrawn worker is not there.
    later = _directory(isolated)
    try:
        wait_for(lambda: later.caught_up, 30, "a later directory reading the topic")
        assert [a.worker_id for a in later.live()] == ["w-2"]
    finally:
        later.close()
