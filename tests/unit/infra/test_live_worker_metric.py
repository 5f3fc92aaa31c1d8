"""cronlog_api_live_workers: one series per declared queue, 0 where no worker serves it, and
no series for a queue a worker names that nobody declared (labels stay bounded)."""

from __future__ import annotations

from prometheus_client import generate_latest

from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.infra.observability.fleet import LiveWorkerCount
from cronlog.infra.observability.registry import RoleMetrics
from tests.support.clock import T0


def worker(worker_id: str, *queues: str) -> WorkerAnnouncement:
    return WorkerAnnouncement(worker_id, "h", queues, ("echo",), 4, 0, "1.0", T0)


def test_live_workers_are_counted_per_declared_queue() -> None:
    metrics = RoleMetrics("api")
    live = [worker("a", "default", "batch"), worker("b", "default"), worker("c", "made-up")]
    metrics.add_collector(LiveWorkerCount(lambda: live, ["default", "batch", "idle"]))
    text = generate_latest(metrics.registry).decode()
    assert 'cronlog_api_live_workers{queue="default"} 2.0' in text
    assert 'cronlog_api_live_workers{queue="batch"} 1.0' in text
    assert 'cronlog_api_live_workers{queue="idle"} 0.0' in text
    assert "made-up" not in text
