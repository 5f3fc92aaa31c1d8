"""Waits for a spawned api to answer its gRPC health check, failing at once when one of the
service's processes has already exited (its log says why; waiting on would only time out)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.polling import wait_for


def first_exited(processes: Mapping[str, subprocess.Popen[bytes]], log_dir: Path) -> str | None:
    """Which role exited, and where its log is; None while every one runs."""
    for role, process in processes.items():
        if process.poll() is not None:
            return f"{role} exited early; see {log_dir / (role + '.log')}"
    return None


def wait_for_api(channel: grpc.Channel, seconds: float, exited: Callable[[], str | None],
                 description: str = "api health SERVING", serving: bool = True) -> None:
    """Until the api's health check says SERVING, or with serving=False answers at all (the
    api is up but not ready without a scheduler); `exited` names a process that is gone."""
    def ready() -> bool:
        gone = exited()
        if gone:
            raise AssertionError(gone)
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=1)
        except grpc.RpcError:
            return False
        return not serving or bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    wait_for(ready, seconds, description)
