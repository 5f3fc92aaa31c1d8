"""The whole service (api, scheduler, worker, history projector) as real processes.

A module's tests get it as the `service` fixture (and `stub`, a JobService client on it). A
module states what is special about its service, and nothing else, in module attributes:

- SERVICE_ENV: environment for every process (settings spawn_role does not pass on from
  Settings, such as tenant tokens);
- SERVICE_OVERRIDES: settings (Settings.with_overrides);
- SERVICE_ROLES: the roles to run, when not all four;
- OWN_SERVICE: why it needs a service of its own although its settings are the default ones
  (it stops or kills processes, or counts everything the service holds).

Such a module gets a service of its own for its tests. The others share one, started once per
session: a test there isolates itself (its own tenant, job names, request ids) and assumes
nothing of what else the service holds. Those modules run first and together, so the shared
service is stopped before the modules with services of their own start
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

import grpc
import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.conftest import ROOT, make_isolated
from tests.support.api_ready import first_exited, wait_for_api

# What a module sets to get a service of its own (see the docstring above).
SPECIAL = ("SERVICE_ENV", "SERVICE_OVERRIDES", "SERVICE_ROLES", "OWN_SERVICE")


def rid() -> str:
    """A fresh request id."""
    return str(uuid.uuid4())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningService:
    settings: object
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


class _Shared:
    """The shared service once started, until the last module on it is done."""

    running: RunningService | None = None


def _stop_shared() -> None:
    running, _Shared.running = _Shared.running, None
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
    """The e2e modules on the shared service first (each keeping its place among them), so
    that one service serves them all and is stopped before the others start."""
    here = Path(__file__).parent
    e2e = [i for i, item in enumerate(items) if item.path.parent == here]
    if not e2e:
        return
    ordered = sorted((items[i] for i in e2e),
                     key=lambda item: not _uses_shared(item))
    for i, item in zip(e2e, ordered, strict=True):
        items[i] = item


def _uses_shared(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    return (module is not None and "service" in getattr(item, "fixturenames", ())
            and on_shared_service(module))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The shared service stops after the last test on it (the fixture below would only stop
    it at the end of the session, after the integration and unit suites)."""
    if _Shared.running is not None and (nextitem is None or not _uses_shared(nextitem)):
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
    """The module's service: the shared one, or its own when the module says what is
    special about it (module docstring)."""
    module = request.module
    if on_shared_service(module):
        request.getfixturevalue("_shared_service")
        if _Shared.running is None:
            _Shared.running = start_service(stack_settings, "shared")
        running = _Shared.running
        for role, process in running.processes.items():
            assert process.poll() is None, f"the shared service's {role} exited; see " \
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
