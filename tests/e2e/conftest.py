"""The whole service (api, scheduler, worker, history projector) as real processes.

A module's tests get it as the `service` fixture (and `stub`, a JobService client on it). A
module states what is special about its service, and nothing else, in module attributes:

- SERVICE_ENV: environment for every process (settings spawn_role does not pass on from
  Settings, such as tenant tokens);
- SERVICE_OVERRIDES: settings (Settings.with_overrides);
- SERVICE_ROLES: the roles to run, when not all four;
- OWN_SERVICE: why it needs a service of its own although its settings are the default ones
  (it stops or kills processes, or counts everything the service holds);
- SERVICE: a group of tests/e2e/service_groups.py whose one service it shares with the other
  modules of the group.

Such a module gets a service of its own for its tests (or its group's). The others share
one, started once per session: a test there isolates itself (its own tenant, job names,
request ids) and assumes nothing of what else the service holds. The modules of one service
run together, those on the default shared service first, and each service is stopped once
its last module is done, before the next one starts
(pytest_collection_modifyitems below)."""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import grpc
import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.conftest import ROOT, make_isolated
from tests.e2e.service_groups import ServiceGroup
from tests.support.api_ready import first_exited, wait_for_api

if TYPE_CHECKING:
    # Only the annotation needs it here: start_service imports it when it runs, as before.
    from cronlog.infra.config import Settings

# What a module sets to get a service of its own (see the docstring above).
SPECIAL = ("SERVICE_ENV", "SERVICE_OVERRIDES", "SERVICE_ROLES", "OWN_SERVICE", "SERVICE")


def rid() -> str:
    """A fresh request id."""
    return str(uuid.uuid4())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningService:
    settings: Settings
    address: str
    channel: grpc.Channel
    processes: dict[str, subprocess.Popen[bytes]]
    log_dir: Path


def start_service(stack_settings: object, name: str,
                  roles: tuple[str, ...] = ("api", "scheduler", "worker", "projector"),
                  extra_env: dict[str, str] | None = None,
                  **overrides: object) -> RunningService:
    """extra_env reaches every spawned process: for settings that spawn_role does not pass
    on from Settings, such as tenant tokens."""
    from cronlog.infra.config import Settings
    from cronlog.infra.provision import provision
    from cronlog_dev.processes import spawn_role

    settings = make_isolated(stack_settings)
    assert isinstance(settings, Settings)
    settings = settings.with_overrides(grpc_address=f"127.0.0.1:{free_port()}", **overrides)
    provision(settings)
    log_dir = ROOT / ".cronlog" / "test-logs" / name
    processes = {role: spawn_role(role, settings, log_dir,
                                  {**(extra_env or {}), "CRONLOG_INSTANCE_ID": f"{name}-{role}"})
                 for role in roles}
    channel = grpc.insecure_channel(settings.grpc_address)
    # Without a scheduler the api is up but not ready: any answer will do.
    wait_for_api(channel, 60, lambda: first_exited(processes, log_dir),
                 serving="scheduler" in roles)
    return RunningService(settings, settings.grpc_address, channel, processes, log_dir)


def stop_service(service: RunningService) -> None:
    from cronlog_dev.processes import stop_all

    service.channel.close()
    stop_all(list(service.processes.values()))


def on_shared_service(module: ModuleType) -> bool:
    """Whether a module's tests use the shared service: they ask for `service`, and the
    module neither defines that fixture itself nor states anything special about it."""
    return not hasattr(module, "service") and not any(hasattr(module, name)
                                                      for name in SPECIAL)


DEFAULT = ServiceGroup("shared")


def service_group(module: ModuleType) -> ServiceGroup | None:
    """The group whose service a module's tests use: the default shared one, the one it
    names, or None for a service of its own."""
    if on_shared_service(module):
        return DEFAULT
    group = getattr(module, "SERVICE", None)
    if group is None or hasattr(module, "service") or any(
            hasattr(module, name) for name in SPECIAL if name != "SERVICE"):
        return None
    assert isinstance(group, ServiceGroup), f"{module.__name__}.SERVICE: not a ServiceGroup"
    return group


class _Shared:
    """The running service of a group, until the last module on it is done."""

    group: ServiceGroup | None = None
    running: RunningService | None = None


def _stop_shared() -> None:
    running, _Shared.running, _Shared.group = _Shared.running, None, None
    if running is not None:
        stop_service(running)


def quiesce(service: RunningService, within: timedelta = timedelta(minutes=30)) -> None:
    """Pauses every job of the service due to fire within `within`: what a module on the
    shared service leaves firing does not load the modules after it. At most 1,000 jobs a
    page, one PauseJob each."""
    stub = pb_grpc.JobServiceStub(service.channel)
    horizon = datetime.now(UTC) + within
    token = ""
    while True:
        page = stub.ListJobs(pb.ListJobsRequest(statuses=[pb.JOB_STATUS_ACTIVE],
                                                page_size=1000, page_token=token), timeout=30)
        for job in page.jobs:
            if job.HasField("next_fire_at") and job.next_fire_at.ToDatetime(UTC) <= horizon:
                try:
                    stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=job.job_id),
                                  timeout=30)
                except grpc.RpcError as exc:  # completed or deleted meanwhile
                    if exc.code() not in (grpc.StatusCode.FAILED_PRECONDITION,
                                          grpc.StatusCode.NOT_FOUND):
                        raise
        token = page.next_page_token
        if not token:
            return


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The e2e modules on the default shared service first, then those of each group
    together (each keeping its place among them), so that one service serves each group's
    modules and is stopped before the next starts."""
    here = Path(__file__).parent
    e2e = [i for i, item in enumerate(items) if item.path.parent == here]
    if not e2e:
        return
    groups: list[ServiceGroup | None] = [DEFAULT]
    for i in e2e:
        group = _group_of(items[i])
        if group is not None and group not in groups:
            groups.append(group)

    def rank(item: pytest.Item) -> int:
        group = _group_of(item)
        return len(groups) if group is None else groups.index(group)

    ordered = sorted((items[i] for i in e2e), key=rank)
    for i, item in zip(e2e, ordered, strict=True):
        items[i] = item


def _group_of(item: pytest.Item) -> ServiceGroup | None:
    """The group of the service an item uses, None when it uses none or its own."""
    module = getattr(item, "module", None)
    if module is None or "service" not in getattr(item, "fixturenames", ()):
        return None
    return service_group(module)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A group's service stops after the last test on it (the fixture below would only stop
    it at the end of the session, after the integration and unit suites)."""
    if _Shared.running is not None and (nextitem is None
                                        or _group_of(nextitem) is not _Shared.group):
        _stop_shared()


@pytest.fixture(scope="session")
def _shared_service(stack_settings: object) -> Iterator[None]:
    try:
        yield
    finally:
        _stop_shared()


@pytest.fixture(scope="module")
def service(stack_settings: object, request: pytest.FixtureRequest
            ) -> Iterator[RunningService]:
    """The module's service: its group's, or its own when the module says what is special
    about it (module docstring)."""
    module = request.module
    group = service_group(module)
    if group is not None:
        request.getfixturevalue("_shared_service")
        if _Shared.group is not group:
            _stop_shared()
            _Shared.running = start_service(stack_settings, group.name, roles=group.roles,
                                            extra_env=group.env or None, **group.overrides)
            _Shared.group = group
        running = _Shared.running
        assert running is not None
        for role, process in running.processes.items():
            assert process.poll() is None, f"the {group.name} service's {role} exited; see " \
                f"{running.log_dir / (role + '.log')}"
        yield running
        quiesce(running)
        return
    running = start_service(stack_settings, module.__name__.rsplit(".", 1)[-1],
                            roles=getattr(module, "SERVICE_ROLES",
                                          ("api", "scheduler", "worker", "projector")),
                            extra_env=getattr(module, "SERVICE_ENV", None),
                            **getattr(module, "SERVICE_OVERRIDES", {}))
    try:
        yield running
    finally:
        stop_service(running)


@pytest.fixture(scope="module")
def stub(service: RunningService) -> pb_grpc.JobServiceStub:
    """A JobService client on the module's service."""
    return pb_grpc.JobServiceStub(service.channel)
