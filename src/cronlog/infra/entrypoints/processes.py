"""Process entry points: each runs one cronlog role until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from cronlog.infra.config import Settings
from cronlog.infra.entrypoints.collector import settle_collector

if TYPE_CHECKING:
    from cronlog.infra.observability.scheduler import SchedulerObservation

log = logging.getLogger(__name__)

# The worker's GIL switch interval, seconds (see run_worker).
WORKER_SWITCH_INTERVAL = 0.001
# A scheduler exits with this when another live process has its instance id (found at start,
# or by being fenced later): restarting it with the same id cannot help.
EXIT_REPLACED = 3
# A worker exits with this when a user handler cannot be loaded (worker/user_handlers.py):
# restarting it unchanged cannot help either.
EXIT_HANDLERS = 4
# A scheduler told to stop hands its partitions over for at most this long before it leaves
# the group; well inside the 20 s a supervisor (and `make run`) waits after SIGTERM.
HANDOVER_WITHIN = 3.0


def _stop_on_signal(stop: Callable[[], None]) -> threading.Event:
    stopped = threading.Event()

    def handle(_signum: int, _frame: object) -> None:
        stopped.set()
        stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stopped


def run_scheduler(settings: Settings) -> None:
    from cronlog.commands.owner.ports import OwnerReplaced
    from cronlog.infra.composition import build_scheduler
    from cronlog.infra.kafka.scheduler_identity import InstanceIdInUse, refuse_if_in_use
    from cronlog.infra.observability.server import start_role_endpoints

    try:
        refuse_if_in_use(settings)
    except InstanceIdInUse as exc:
        log.error("scheduler not started: %s", exc)
        raise SystemExit(EXIT_REPLACED) from None
    # Bound before anything connects, as the worker's: a taken port stops the start at once.
    observation = _scheduler_observation(settings)
    endpoints = start_role_endpoints(settings, observation.metrics, observation.readiness) \
        if observation else None
    owner, transport = build_scheduler(settings, observation)
    settle_collector()
    stopped = _stop_on_signal(lambda: None)
    log.info("scheduler %s running", settings.instance_id)
    try:
        while not stopped.is_set():
            owner.cycle()
        # Leaving on purpose: the next owners find everything due soon already dispatched;
        # closing the transport then leaves the group at once (no session timeout to wait).
        owner.hand_over(settings.handover_reach, HANDOVER_WITHIN)
    except OwnerReplaced as exc:
        # The newer process with this id holds the transactional producer; this one can
        # write nothing more. Going on would re-take the id and fence the other in turn.
        log.error("scheduler stopped: another scheduler process was started with the same "
                  "CRONLOG_INSTANCE_ID %r and took over its Kafka transactions (%s). Give "
                  "every scheduler its own CRONLOG_INSTANCE_ID, or leave it unset for a "
                  "unique default.", settings.instance_id, exc)
        raise SystemExit(EXIT_REPLACED) from None
    finally:
        transport.close()  # type: ignore[attr-defined]
        if endpoints:
            endpoints.stop()


def _scheduler_observation(settings: Settings) -> SchedulerObservation | None:
    from cronlog.infra.observability.scheduler import (
        PostgresCheck,
        SchedulerObservation,
        ask_postgres,
    )

    if not settings.scheduler_metrics_port:
        return None
    return SchedulerObservation(PostgresCheck(ask_postgres(settings.postgres_dsn)),
                                queues=sorted({"default", *settings.queues}))


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
    from cronlog.infra.composition import build_announcer, build_worker
    from cronlog.infra.observability.server import start_role_endpoints
    from cronlog.infra.observability.worker import WorkerObservation
    from cronlog.worker.user_handlers import HandlerLoadError

    # Started runs are what users wait for: on a machine shared with a scheduler, a burst's
    # due runs start first and the reports of runs already going are recorded after
    # (measured: docs/benchmarks-history.md, the worker's CPU priority).
    _take_cpu_priority(settings.worker_nice, "worker")
    queues = settings.served_queues
    # Bound before anything connects: a taken port stops the start at once, and /healthz
    # answers while the loops are built (/readyz says what they wait for).
    observation = WorkerObservation() if settings.worker_metrics_port else None
    endpoints = start_role_endpoints(settings, observation.metrics, observation.readiness) \
        if observation else None
    try:
        workers = [build_worker(settings, q, observation) for q in queues]
    except HandlerLoadError as exc:
        log.error("worker not started: %s", exc)
        raise SystemExit(EXIT_HANDLERS) from None
    settle_collector()
    threads = [threading.Thread(target=w.run_forever, name=f"worker-{q}")
               for w, q in zip(workers, queues, strict=True)]
    # Seen by `cronlog workers list` from its start; withdrawn at a clean stop.
    announcing = threading.Event()
    announcer = threading.Thread(target=build_announcer(settings, workers).run,
                                 args=(announcing,), name="worker-announcer")

    def stop_all() -> None:
        announcing.set()
        for w in workers:
            w.stop()

    _stop_on_signal(stop_all)
    # A worker's loop hands each run to a handler thread and back: with CPython's default
    # 5 ms GIL switch interval a thread waiting for the GIL waits that long; 1 ms starts
    # markedly more runs a second (docs/benchmarks.md).
    sys.setswitchinterval(WORKER_SWITCH_INTERVAL)
    for t in [*threads, announcer]:
        t.start()
    log.info("worker running for queues %s", ", ".join(queues))
    for t in threads:
        t.join()
    # Also when a loop ended on its own (a crash): a worker that runs nothing more must not
    # go on announcing itself.
    announcing.set()
    announcer.join()
    if endpoints:
        endpoints.stop()


def run_projector(settings: Settings) -> None:
    from cronlog.infra.composition import build_history_projector
    from cronlog.infra.observability.projector import ProjectorObservation
    from cronlog.infra.observability.server import start_role_endpoints

    # History may lag under load; firing and starting runs must not. On a shared machine the
    # projector yields the CPU to the scheduler and the workers.
    _take_cpu_priority(settings.projector_nice, "history projector")
    # Bound before anything connects, as the worker's: a taken port stops the start at once.
    observation = ProjectorObservation() if settings.projector_metrics_port else None
    endpoints = start_role_endpoints(settings, observation.metrics, observation.readiness) \
        if observation else None
    loop = build_history_projector(settings, observation)
    settle_collector()
    _stop_on_signal(loop.stop)
    log.info("history projector running")
    try:
        loop.run_forever()
    finally:
        if endpoints:
            endpoints.stop()


def run_notifier(settings: Settings) -> None:
    from cronlog.infra.notifier.role import build_notifier
    from cronlog.infra.observability.notifier import NotifierObservation
    from cronlog.infra.observability.server import start_role_endpoints

    # Bound before anything connects, as the worker's: a taken port stops the start at once.
    observation = NotifierObservation() if settings.notifier_metrics_port else None
    endpoints = start_role_endpoints(settings, observation.metrics, observation.readiness) \
        if observation else None
    loop = build_notifier(settings, observation)
    settle_collector()
    _stop_on_signal(loop.stop)
    log.info("notifier running")
    try:
        loop.run_forever()
    finally:
        if endpoints:
            endpoints.stop()


def run_api(settings: Settings) -> None:
    from cronlog.infra.composition import build_api
    from cronlog.infra.observability.api import ApiObservation
    from cronlog.infra.observability.server import start_role_endpoints

    observation = ApiObservation()
    # Bound before anything connects, as the worker's: a taken port stops the start at once.
    endpoints = start_role_endpoints(settings, observation.metrics, observation.readiness)
    server = build_api(settings, observation)
    settle_collector()
    stopped = _stop_on_signal(lambda: None)
    server.start()
    log.info("api listening on %s", server.address)
    stopped.wait()
    server.stop()
    if endpoints:
        endpoints.stop()


def run_console(settings: Settings) -> None:
    from cronlog.infra.console.server import run_console as serve

    serve(settings)
