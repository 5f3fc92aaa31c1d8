"""The api's view of the worker fleet as a metric: live workers per declared queue."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily

from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.infra.observability.catalogue import API_LIVE_WORKERS
from cronlog.infra.observability.registry import gauge_family


class LiveWorkerCount:
    """A collector: read at scrape time. Only declared queues are labels (bounded); every
    declared queue is present, 0 when no worker serves it (what an alert wants to see)."""

    def __init__(self, live: Callable[[], Sequence[WorkerAnnouncement]],
                 queues: Sequence[str]) -> None:
        self._live = live
        self._queues = tuple(sorted(set(queues)))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = dict.fromkeys(self._queues, 0)
        for a in self._live():
            for queue in a.queues:
                if queue in counts:
                    counts[queue] += 1
        yield gauge_family(API_LIVE_WORKERS, [((q,), n) for q, n in counts.items()])
