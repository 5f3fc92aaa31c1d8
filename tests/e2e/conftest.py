"""The whole service (api, scheduler, worker, history projector) as real processes."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from tests.conftest import ROOT, make_isolated
from tests.support.api_ready import first_exited, wait_for_api


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


@pytest.fixture(scope="module")
def service(stack_settings: object, request: pytest.FixtureRequest) -> Iterator[RunningService]:
    running = start_service(stack_settings, request.module.__name__.rsplit(".", 1)[-1],
                            extra_env=getattr(request.module, "SERVICE_ENV", None),
                            **getattr(request.module, "SERVICE_OVERRIDES", {}))
    try:
        yield running
    finally:
        stop_service(running)
