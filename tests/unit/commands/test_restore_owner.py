"""RestoreJob at its owner (issue 38): a deleted dependent job brought back is linked to its
upstreams again and runs after them; the request id is taken once, as every command's."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cronlog.domain.dependency import Dependency, DependencyCondition
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import spec_to_record
from tests.support.clock import T0
from tests.support.owner import make_owner
from tests.support.owner_inbox import inbound
from tests.support.owner_store import RequestStore
from tests.support.owner_world import World

UPSTREAM = JobSpec(name="a", tenant="t", queue="q1", handler="echo", cron="0 * * * * *",
                   time_zone="UTC")

# Fires only once a year: nothing moves the job's version between two commands.
YEARLY = JobSpec(name="y", tenant="t", queue="q1", handler="echo", cron="0 0 1 1 *",
                 time_zone="UTC")


def dependent(upstream: UUID) -> JobSpec:
    return JobSpec(name="b", tenant="t", queue="q1", handler="echo",
                   after=Dependency((upstream,), DependencyCondition.ON_SUCCESS))


def restore(world: World, job_id: UUID, version: int, spec: JobSpec,
            request_id: str) -> dict[str, Any]:
    """Sends a RestoreJob; its reply's record."""
    world.offset += 1
    world.send(inbound("RestoreJob", {
        "request_id": request_id, "job_id": str(job_id), "at": T0, "restored_version": version,
        "skip_missed": False, "spec": spec_to_record(spec), "correlation_id": request_id},
        world.offset))
    return dict(world.written("CommandReply")[-1].record)


def command(world: World, name: str, job_id: UUID, request_id: str) -> None:
    world.offset += 1
    world.send(inbound(name, {"request_id": request_id, "job_id": str(job_id), "at": T0,
                              "correlation_id": request_id}, world.offset))


def test_a_deleted_dependent_restored_follows_its_upstream_again() -> None:
    world = World()
    a = world.create(UPSTREAM, "a")
    b = world.create(dependent(a), "b")
    command(world, "DeleteJob", b, "del-b")
    assert world.store.jobs[b].status == "deleted"
    assert world.store.jobs[a].dependents == (), "unlinked on delete"
    reply = restore(world, b, 1, dependent(a), "restore-b")
    assert reply["ok"], reply
    job = world.store.jobs[b]
    assert (job.status, job.revision) == ("active", job.version)
    assert world.store.jobs[a].dependents == (b,), "linked again on the upstream's log"
    (restored,) = world.written("JobRestored")
    assert (restored.record["restored_version"], restored.record["status"]) == (1, "active")
    world.at(59)
    (run_a,) = world.runs_of(a)
    world.finish(run_a)
    assert len(world.runs_of(b)) == 1, "the restored dependent runs after its upstream"


def test_a_restore_is_applied_once_per_request_id() -> None:
    world = World()
    # Request ids taken as the projection takes them.
    world.store = RequestStore(replays=True)
    world.owner = make_owner(world.store, world.transport, world.clock)
    a = world.create(YEARLY, "a")
    command(world, "DeleteJob", a, "del-a")
    first = restore(world, a, 1, YEARLY, "restore-a")
    version = world.store.jobs[a].version
    again = restore(world, a, 1, YEARLY, "restore-a")
    assert first["ok"] and again["ok"] and again["job_version"] == first["job_version"]
    assert world.store.jobs[a].version == version, "nothing written the second time"
    assert len(world.written("JobRestored")) == 1
    other = restore(world, a, 2, YEARLY, "restore-a")
    assert not other["ok"] and other["error_field"] == "request_id", other


def test_restoring_a_job_that_does_not_exist_is_not_found() -> None:
    world = World()
    missing = UUID(int=7)
    reply = restore(world, missing, 1, UPSTREAM, "restore-x")
    assert (reply["ok"], reply["error_code"]) == (False, "NOT_FOUND")
    assert world.written("JobRestored") == []
