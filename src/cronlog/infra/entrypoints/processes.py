"""Process entry points: each runs one cronlog role until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

from cronlog.infra.config import Settings

log = logging.getLogger(__name__)

# The worker's GIL switch interval, seconds (see run_worker).
WORKER_SWITCH_INTERVAL = 0.001


def _stop_on_signal(stop: Callable[[], None]) -> threading.Event:
    stopped = threading.Event()

    def handle(_signum: int, _frame: object) -> None:
        stopped.set()
        stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stopped


def run_scheduler(settings: Settings) -> None:
    from cronlog.infra.composition import build_scheduler

    owner, transport = build_scheduler(settings)
    stopped = _stop_on_signal(lambda: None)
    log.info("scheduler %s running", settings.instance_id)
    try:
        while not stopped.is_set():
            owner.cycle()
    finally:
        transport.close()  # type: ignore[attr-defined]


def _take_cpu_priority(increment: int, role: str) -> None:
    """Linux keeps a niceness per thread and new threads inherit their creator's: called
    before the role builds anything, it covers the Kafka client's threads too."""
    if not increment:
        return
    try:
        os.nice(increment)
    except PermissionError:
        log.warning("%s: not permitted to change its CPU priority by %d (raising it needs "
                    "CAP_SYS_NICE); running at the usual priority", role, increment)


def run_worker(settings: Settings) -> None:
    from cronlog.infra.composition import build_worker

    # Started runs are what users wait for: on a machine shared with a scheduler, a burst's
    # due runs start first and the reports of runs already going are recorded after
    # (100k burst: 16.7 s from its second to the last start at priority 0, 10.2 s at -5).
    _take_cpu_priority(settings.worker_nice, "worker")
    workers = [build_worker(settings, q) for q in settings.worker_queues]
    threads = [threading.Thread(target=w.run_forever, name=f"worker-{q}")
               for w, q in zip(workers, settings.worker_queues, strict=True)]
    def stop_all() -> None:
        for w in workers:
            w.stop()

    _stop_on_signal(stop_all)
    # A worker's loop hands each run to a handler thread and back: with CPython's default
    # 5 ms GIL switch interval a thread waiting for the GIL waits that long. 1 ms took an
    # isolated worker from about 6,000 to 9,500 started runs/s (docs/benchmarks.md).
    sys.setswitchinterval(WORKER_SWITCH_INTERVAL)
    for t in threads:
        t.start()
    log.info("worker running for queues %s", ", ".join(settings.worker_queues))
    for t in threads:
        t.join()


def run_projector(settings: Settings) -> None:
    from cronlog.infra.composition import build_history_projector

    # History may lag under load; firing and starting runs must not. On a shared machine the
    # projector yields the CPU to the scheduler and the workers.
    _take_cpu_priority(settings.projector_nice, "history projector")
    loop = build_history_projector(settings)
    _stop_on_signal(loop.stop)
    log.info("history projector running")
    loop.run_forever()


def run_api(settings: Settings) -> None:
    from cronlog.infra.composition import build_api

    server = build_api(settings)
    stopped = _stop_on_signal(lambda: None)
    server.start()
    log.info("api listening on %s", server.address)
    stopped.wait()
    server.stop()
