"""A fresh machine's first start: a 3-node cluster and a single broker launched at the same
time on an empty jar cache both come up (issue 32: each node ran its own Maven into one
folder and two of three failed; CI, whose cache was warm, never saw it)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronlog_dev.stack.install_once import COMPLETE
from cronlog_dev.stack.kafka_broker import KAFKA_VERSION, KafkaBroker
from cronlog_dev.stack.kafka_cluster import KafkaCluster

# Below the session cluster's 28092.., above the test stack's 21092..25061; nodes 10 apart.
CLUSTER_PORT, CLUSTER_CONTROLLER_PORT = 27092, 27093
BROKER_PORT, BROKER_CONTROLLER_PORT = 27192, 27193


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CRONLOG_CACHE_DIR", str(cache))
    yield cache


def test_a_cluster_and_a_broker_started_at_once_on_an_empty_cache_both_serve(
        empty_cache: Path, tmp_path: Path) -> None:
    offset = int(os.environ.get("CRONLOG_TEST_PORT_OFFSET", "0"))
    cluster = KafkaCluster(tmp_path / "cluster", CLUSTER_PORT + offset,
                           CLUSTER_CONTROLLER_PORT + offset, brokers=3, partitions=1)
    broker = KafkaBroker(tmp_path / "broker", BROKER_PORT + offset,
                         BROKER_CONTROLLER_PORT + offset, partitions=1, heap_mb=384)
    errors: list[BaseException] = []

    def start(server: KafkaCluster | KafkaBroker) -> None:
        try:
            server.start()
        except BaseException as exc:  # asserted below, after both had their try
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in (cluster, broker)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert broker.pid is not None
        assert sorted(cluster.running()) == [1, 2, 3]
        cluster.wait_registered(30)
    finally:
        cluster.stop()
        broker.stop()
    libs = empty_cache / f"kafka-{KAFKA_VERSION}" / "libs"
    assert (libs / COMPLETE).is_file()
    assert any(p.name.startswith("kafka_2.13-") for p in libs.iterdir())
    # One install, nothing half-done left beside it.
    assert sorted(p.name for p in empty_cache.glob(f"kafka-{KAFKA_VERSION}/*")) == [
        ".libs.lock", "libs"]
