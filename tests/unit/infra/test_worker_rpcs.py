"""What ListWorkers shows an operator and a tenant, and when CreateJob and UpdateJob warn
(docs/workers.md)."""

from __future__ import annotations

from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.infra.grpc.worker_rpcs import job_warnings, list_workers
from cronlog.v1 import job_service_pb2 as pb
from tests.support.clock import T0

WORKER = WorkerAnnouncement("w-1", "host-1", ("default", "private"),
                            ("echo", "secret-handler"), 16, 3, "1.0", T0)
DECLARED = DeclaredQueues.of(["default", "private"], {"acme": ["default"]},
                             {"acme": ["echo"]}, closed=True)


class Fleet:
    def __init__(self, live: list[WorkerAnnouncement], caught_up: bool = True) -> None:
        self._live = live
        self.caught_up = caught_up

    def live(self) -> list[WorkerAnnouncement]:
        return self._live


def test_the_operator_sees_every_worker_whole() -> None:
    [seen] = list_workers(Fleet([WORKER]), DECLARED, None, "").workers
    assert (seen.worker_id, seen.host, list(seen.queues), list(seen.handlers)) == (
        "w-1", "host-1", ["default", "private"], ["echo", "secret-handler"])
    assert (seen.slots, seen.slots_in_use, seen.version) == (16, 3, "1.0")
    assert seen.last_seen.ToDatetime().replace(tzinfo=T0.tzinfo) == T0


def test_a_tenant_sees_only_its_queues_and_handlers_and_no_host() -> None:
    [seen] = list_workers(Fleet([WORKER]), DECLARED, "acme", "").workers
    assert (list(seen.queues), list(seen.handlers), seen.host) == (["default"], ["echo"], "")


def test_a_worker_of_none_of_the_tenants_queues_is_not_shown() -> None:
    other = WorkerAnnouncement("w-2", "h", ("private",), ("echo",), 1, 0, "1.0", T0)
    assert list_workers(Fleet([other]), DECLARED, "acme", "").workers == []


def test_the_queue_filter() -> None:
    assert list_workers(Fleet([WORKER]), DECLARED, None, "default").workers
    assert not list_workers(Fleet([WORKER]), DECLARED, None, "reports").workers


def job(queue: str, handler: str) -> pb.Job:
    return pb.Job(spec=pb.JobSpec(queue=queue, handler=handler))


def test_a_job_whose_handler_no_live_worker_offers_is_warned_about() -> None:
    assert job_warnings(Fleet([WORKER]), job("default", "echo")) == []
    [warning] = job_warnings(Fleet([WORKER]), job("default", "backup"))
    assert "'backup'" in warning


def test_no_warning_before_the_topic_was_read_to_its_end_or_without_a_fleet() -> None:
    assert job_warnings(Fleet([], caught_up=False), job("default", "backup")) == []
    assert job_warnings(None, job("default", "backup")) == []
