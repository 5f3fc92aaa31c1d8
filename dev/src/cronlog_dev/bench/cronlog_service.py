"""One cronlog deployment for one workload: scheduler, worker and history projector."""

from __future__ import annotations

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
                 workers: int = 1) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._counts = {"scheduler": schedulers, "worker": workers, "projector": 1}

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
                     "CRONLOG_WORKER_ID": f"{self.settings.group_prefix}-{name}"})

    def check_alive(self) -> None:
        for role, proc in self.processes.items():
            if proc.poll() is not None:
                raise ServiceDied(f"cronlog {role} exited with {proc.returncode}; see "
                                  f"{self.log_dir / (role + '.log')}")

    def pids(self) -> dict[str, int]:
        return {f"cronlog-{role}": p.pid for role, p in self.processes.items()}

    def stop(self) -> None:
        stop_all(list(self.processes.values()))
