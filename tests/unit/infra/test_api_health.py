"""The api's health follows its command path besides the partition owners: NOT_SERVING
while the reply reader does not read or the inbox producer reaches no broker, with the
reason in the log and on /readyz; SERVING again once both work."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import pytest

from cronlog.commands.api.ports import GroupMember, OwnerRecord
from cronlog.commands.api.readiness import ReadinessWatch
from cronlog.infra.observability.api import COMMANDS_CLIENT, ApiObservation
from cronlog.infra.observability.kafka_stats import STALE_AFTER
from cronlog.infra.observability.registry import RoleMetrics
from tests.support.polling import wait_for

MEMBER = GroupMember("member-a", "scheduler-1")


class Group:
    def members_by_partition(self) -> Mapping[int, GroupMember]:
        return {0: MEMBER}


class Records:
    def owner_records(self) -> Mapping[int, OwnerRecord]:
        return {0: OwnerRecord("scheduler-1", "member-a")}


def producer_statistics(up: bool) -> str:
    return json.dumps({"msg_cnt": 0, "brokers": {
        "b/1": {"nodeid": 1, "state": "UP" if up else "DOWN", "rtt": {"avg": 500}}},
        "topics": {}})


class Setup:
    def __init__(self, interval: float = 0.5) -> None:
        self.now = 100.0
        self.reader: str | None = None
        self.serving: list[bool] = []
        self.observation = ApiObservation(RoleMetrics("api", default_collectors=False),
                                          monotonic=lambda: self.now)
        self.observation.watch_reply_reader(lambda: self.reader)
        self.watch = ReadinessWatch(1, Group(), Records(), self.serving.append,
                                    interval=interval, path=self.observation)
        self.observation.watch_owners(self.watch)


def test_serving_follows_the_reply_reader_and_the_producer() -> None:
    setup = Setup()
    assert not setup.observation.readiness().ready  # the watch has not looked yet
    setup.watch.check()
    # Just started: no producer statistics yet, and none expected.
    assert setup.serving == [True] and setup.observation.readiness().ready

    setup.reader = "the reply reader has stopped: KafkaException: fatal"
    setup.watch.check()
    assert setup.serving == [True, False]
    assert setup.observation.readiness().not_ready == (
        "the reply reader has stopped: KafkaException: fatal",)
    assert "fatal" in setup.watch.explain(0)

    setup.reader = None
    setup.observation.kafka.listener(COMMANDS_CLIENT)(producer_statistics(up=False))
    setup.watch.check()
    assert setup.serving == [True, False]
    assert setup.observation.readiness().not_ready == (
        "the inbox producer reaches no Kafka broker",)

    setup.observation.kafka.listener(COMMANDS_CLIENT)(producer_statistics(up=True))
    setup.watch.check()
    assert setup.serving == [True, False, True]

    # Statistics stop coming (the producer is not polled, or Kafka is gone for good).
    setup.now += STALE_AFTER + 1
    setup.watch.check()
    assert setup.serving == [True, False, True, False]
    assert "no Kafka statistics within 15 s" in setup.observation.readiness().not_ready[0]


def test_the_watch_logs_why_commands_must_wait(caplog: pytest.LogCaptureFixture) -> None:
    setup = Setup(interval=0.01)
    setup.reader = ("the reply reader reads no partition of wrong.replies (does the topic "
                    "exist?)")
    with caplog.at_level(logging.WARNING, logger="cronlog.commands.api.readiness"):
        setup.watch.start()
        try:
            wait_for(lambda: any("wrong.replies" in r.getMessage() for r in caplog.records),
                     5, "the reason logged")
        finally:
            setup.watch.stop()
    assert setup.serving == [False]
    assert any(r.getMessage().startswith("commands must wait: the reply reader reads no "
                                         "partition of wrong.replies") for r in caplog.records)
