"""One cronlog deployment for one workload: scheduler, worker and history projector."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from cronlog.infra.config import Settings
from cronlog.infra.provision import provision
from cronlog_dev.processes import spawn_role, stop_all

# No api: the bench puts the api's CreateJob commands on the inbox itself (see
# cronlog_jobs), so an api process would only sit idle.
ROLES = ("scheduler", "worker", "projector")


class ServiceDied(RuntimeError):
    """A cronlog process exited while the workload ran."""


class CronlogService:
    def __init__(self, settings: Settings, log_dir: Path, schedulers: int = 1,
                 workers: int = 1, metrics: bool = False) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._counts = {"scheduler": schedulers, "worker": workers, "projector": 1}
        # Each process's /metrics URL, when they serve it (the metrics-cost workload).
        self.metrics = metrics
        self.metrics_urls: dict[str, str] = {}

    def start(self) -> None:
        provision(self.settings)
        for role in ROLES:
            count = self._counts[role]
            for n in range(1, count + 1):
                # One process keeps the plain role name, as in the logs of a single one.
                name = role if count == 1 else f"{role}-{n}"
                self.processes[name] = spawn_role(
                    role, self.settings, self.log_dir if count == 1 else self.log_dir / name,
                    {"CRONLOG_INSTANCE_ID": f"{self.settings.group_prefix}-{name}",
                     "CRONLOG_WORKER_ID": f"{self.settings.group_prefix}-{name}",
                     **self._metrics_env(role, name)})

    def _metrics_env(self, role: str, name: str) -> dict[str, str]:
        variable = f"CRONLOG_{role.upper()}_METRICS_PORT"
        if not self.metrics:
            # Said outright: a port exported in the bench's own environment would otherwise
            # reach every process, and two of a role would collide on it.
            return {variable: "0"}
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        self.metrics_urls[name] = f"http://127.0.0.1:{port}/metrics"
        return {variable: str(port), "CRONLOG_METRICS_HOST": "127.0.0.1"}

    def check_alive(self) -> None:
        for role, proc in self.processes.items():
            if proc.poll() is not None:
                raise ServiceDied(f"cronlog {role} exited with {proc.returncode}; see "
                                  f"{self.log_dir / (role + '.log')}")

    def pids(self) -> dict[str, int]:
        return {f"cronlog-{role}": p.pid for role, p in self.processes.items()}

    def stop(self) -> None:
        stop_all(list(self.processes.values()))
