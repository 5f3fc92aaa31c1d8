"""The projector's lag and readiness from its loop's reports and its consumer's librdkafka
statistics (no broker: the statistics are librdkafka's JSON, the clocks are fakes)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from prometheus_client import generate_latest

from cronlog.infra.observability.kafka_stats import parse_statistics
from cronlog.infra.observability.projector import (
    HISTORY_CLIENT,
    STALLED_AFTER,
    ProjectorObservation,
    ProjectorProbes,
)
from cronlog.infra.observability.registry import RoleMetrics
from tests.support.clock import FakeClock

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


def statistics(read_to: int, end: int, committed: int | None = None, up: bool = True) -> str:
    """One assigned partition of the run events: read up to `read_to`, log up to `end`."""
    partition = {"partition": 0, "fetch_state": "active", "ls_offset": end, "hi_offset": end,
                 "lo_offset": 0, "app_offset": read_to,
                 "committed_offset": read_to if committed is None else committed,
                 "consumer_lag": end - (read_to if committed is None else committed)}
    return json.dumps({"msg_cnt": 0, "brokers": {
        "b/1": {"nodeid": 1, "state": "UP" if up else "DOWN", "rtt": {"avg": 1000}}},
        "topics": {"cronlog.run-events": {"partitions": {"0": partition}}}})


def observed(clocks: FakeClock, reachable: bool = True
             ) -> tuple[ProjectorObservation, dict[str, object]]:
    state: dict[str, object] = {"assignment": frozenset({("cronlog.run-events", 0)})}
    observation = ProjectorObservation(RoleMetrics("projector", default_collectors=False),
                                       now=clocks.now, monotonic=clocks.monotonic)
    observation.watch(ProjectorProbes(lambda: state["assignment"], lambda: reachable))
    return observation, state


def sample(observation: ProjectorObservation, name: str) -> float | None:
    return observation.metrics.registry.get_sample_value(name)


def test_unconsumed_counts_from_the_position_past_transaction_markers() -> None:
    # Committed at the last message + 1, the marker after it keeps the committed lag at 1.
    stats = parse_statistics(statistics(read_to=6, end=6, committed=5))
    assert stats.consumer_lag == {"cronlog.run-events": 1}
    assert stats.unconsumed == {"cronlog.run-events": 0}


def test_caught_up_is_no_lag_however_old_the_newest_event() -> None:
    clocks = FakeClock(NOW, 1000.0)
    observation, _ = observed(clocks)
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=10, end=10))
    observation.batch_received(2, NOW - timedelta(hours=2))
    observation.events_applied({"RunSucceeded": 2}, NOW - timedelta(hours=1))
    observation.batch_received(0, None)
    clocks.advance(3600)
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=10, end=10))
    assert sample(observation, "cronlog_projector_lag_seconds") == 0.0
    assert sample(observation, "cronlog_projector_lag_messages") == 0.0
    assert observation.metrics.registry.get_sample_value(
        "cronlog_projector_events_applied_total", {"event": "RunSucceeded"}) == 2
    assert observation.readiness().ready


def test_while_events_wait_the_lag_is_the_newest_applied_events_age() -> None:
    clocks = FakeClock(NOW, 1000.0)
    observation, _ = observed(clocks)
    observation.events_applied({"RunStarted": 1}, NOW - timedelta(seconds=30))
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=10, end=25))
    observation.batch_received(5, NOW - timedelta(seconds=20))
    assert sample(observation, "cronlog_projector_lag_messages") == 20.0
    assert sample(observation, "cronlog_projector_lag_seconds") == 30.0


def test_no_lag_in_seconds_is_told_before_anything_is_known() -> None:
    clocks = FakeClock(NOW, 1000.0)
    observation, _ = observed(clocks)
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=0, end=25))
    text = generate_latest(observation.metrics.registry).decode()
    assert "cronlog_projector_lag_messages 25.0" in text
    assert "\ncronlog_projector_lag_seconds " not in text


def test_stalled_only_after_events_waited_the_whole_time_with_none_applied() -> None:
    clocks = FakeClock(NOW, 1000.0)
    observation, _ = observed(clocks)
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=10, end=10))
    observation.events_applied({"RunStarted": 1}, NOW)
    # A quiet hour, then events arrive: waiting a moment is not an hour without progress.
    clocks.advance(3600)
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=10, end=12))
    observation.batch_received(2, NOW)
    assert observation.readiness().ready
    clocks.advance(STALLED_AFTER - 1)
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=12, end=12))
    assert observation.readiness().ready
    clocks.advance(2)
    assert observation.readiness().not_ready == (
        f"stalled: 2 events waiting and none applied for {STALLED_AFTER + 1:.0f} s",)
    observation.events_applied({"RunStarted": 2}, clocks.at)
    assert observation.readiness().ready


def test_not_ready_until_assigned_with_a_broker_and_clickhouse() -> None:
    clocks = FakeClock(NOW, 1000.0)
    observation = ProjectorObservation(RoleMetrics("projector", default_collectors=False),
                                       now=clocks.now, monotonic=clocks.monotonic)
    assert not observation.readiness().ready
    observation, state = observed(clocks, reachable=False)
    state["assignment"] = None
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=0, end=0, up=False))
    assert observation.readiness().not_ready == (
        "no partitions assigned yet (joining the history group)",
        "no Kafka broker reachable",
        "ClickHouse does not answer")
    # A projector beyond the partition count is a standby: empty counts as assigned.
    state["assignment"] = frozenset()
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=0, end=0))
    assert observation.readiness().not_ready == ("ClickHouse does not answer",)


def test_clickhouse_is_asked_at_most_every_few_seconds() -> None:
    clocks, pings = FakeClock(NOW, 1000.0), []
    observation = ProjectorObservation(RoleMetrics("projector", default_collectors=False),
                                       now=clocks.now, monotonic=clocks.monotonic)

    def ping() -> bool:
        pings.append(1)
        return True

    observation.watch(ProjectorProbes(lambda: frozenset(), ping))
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=0, end=0))
    for _ in range(5):
        assert observation.readiness().ready
    assert len(pings) == 1
    clocks.advance(11)
    observation.kafka.listener(HISTORY_CLIENT)(statistics(read_to=0, end=0))
    observation.readiness()
    assert len(pings) == 2
