"""ListWorkers, and the warnings CreateJob and UpdateJob give when no live worker offers a
job's handler (docs/workers.md).

Workers are shared infrastructure. A caller without a tenant (the api runs open) is the
operator and sees everything. A tenant sees only the queues it may use and, on them, only
the handlers it may name (commands/queue_catalog.py), and no host: it learns what can run
its jobs, not where the deployment runs or what other tenants are given (invariant 10)."""

from __future__ import annotations

from typing import Protocol

from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.fleet.live_workers import absent_handler_warning
from cronlog.v1 import job_service_pb2 as pb


class FleetView(Protocol):
    """The workers topic as the api has read it (infra/kafka/worker_announcements.py)."""

    @property
    def caught_up(self) -> bool: ...

    def live(self) -> list[WorkerAnnouncement]: ...


def _seen_by(a: WorkerAnnouncement, declared: DeclaredQueues,
             caller: str | None) -> pb.Worker | None:
    worker = pb.Worker(worker_id=a.worker_id, host=a.host, queues=a.queues,
                       handlers=a.handlers, slots=a.slots, slots_in_use=a.slots_in_use,
                       version=a.version)
    worker.last_seen.FromDatetime(a.at)
    if caller is None:
        return worker
    queues, handlers = declared.allowed_queues(caller), declared.allowed_handlers(caller)
    shown = [q for q in a.queues if q in declared.queues and (queues is None or q in queues)]
    if not shown:
        return None
    del worker.queues[:], worker.handlers[:]
    worker.queues.extend(shown)
    worker.handlers.extend(h for h in a.handlers if handlers is None or h in handlers)
    worker.host = ""
    return worker


def list_workers(fleet: FleetView | None, declared: DeclaredQueues, caller: str | None,
                 queue: str) -> pb.ListWorkersResponse:
    """At most MAX_WORKERS workers (fleet/live_workers.py), each bounded."""
    response = pb.ListWorkersResponse()
    for a in fleet.live() if fleet is not None else []:
        worker = _seen_by(a, declared, caller)
        if worker is not None and (not queue or queue in worker.queues):
            response.workers.append(worker)
    return response


def job_warnings(fleet: FleetView | None, job: pb.Job) -> list[str]:
    """None until the api has read the workers topic to its end once: a worker not read yet
    is no absent worker."""
    if fleet is None or not fleet.caught_up:
        return []
    warning = absent_handler_warning(fleet.live(), job.spec.queue, job.spec.handler)
    return [warning] if warning else []
