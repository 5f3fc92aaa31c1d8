"""Several cronlog processes on one machine, each killable, stoppable and restartable."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.kafka.event_replay import KafkaEventReplay
from cronlog.ports import LogUnavailable
from cronlog_dev.processes import spawn_role, stop_all
from tests.support.polling import wait_for


@dataclass
class Cluster:
    settings: Settings
    log_dir: Path
    record_dir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)

    def start(self, name: str, role: str) -> None:
        self.roles[name] = role
        self.processes[name] = spawn_role(role, self.settings, self.log_dir / name, {
            "CRONLOG_INSTANCE_ID": name, "CRONLOG_WORKER_ID": name,
            "CRONLOG_CHAOS_RECORD_DIR": str(self.record_dir)})

    def signal(self, name: str, sig: signal.Signals) -> None:
        self.processes[name].send_signal(sig)
        if sig == signal.SIGKILL:
            self.processes[name].wait(10)

    def start_all(self, *names: str) -> None:
        """Starts each named process in order, its role the name's first part: "api",
        "scheduler-2"."""
        for name in names:
            self.start(name, name.split("-", 1)[0])

    def restart(self, name: str) -> None:
        self.start(name, self.roles[name])

    def dead(self) -> list[str]:
        return [n for n, p in self.processes.items() if p.poll() is not None]

    def exited_early(self) -> str | None:
        dead = self.dead()
        return f"exited early: {dead}; see {self.log_dir}" if dead else None

    def stop(self) -> None:
        for p in self.processes.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
        stop_all(list(self.processes.values()))

    def log_text(self, name: str) -> str:
        path = self.log_dir / name / f"{self.roles[name]}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def running_since(self, name: str, before: float) -> int:
        """How many executions the named worker started before `before` (epoch seconds)
        and has not finished."""
        pid = self.processes[name].pid
        started = self.record_dir / f"worker-{pid}.log"
        done = self.record_dir / f"worker-{pid}.done"
        ended = set(done.read_text().splitlines()) if done.exists() else set()
        count = 0
        for line in (started.read_text().splitlines() if started.exists() else []):
            parts = line.split()
            if (len(parts) == 3 and float(parts[2]) < before
                    and f"{parts[0]} {parts[1]}" not in ended):
                count += 1
        return count

    def executions(self) -> list[str]:
        return [line.split()[0] for f in sorted(self.record_dir.glob("*.log"))
                for line in f.read_text().splitlines() if line.strip()]


@dataclass
class LogFollower:
    """Reads a topic's committed messages incrementally, so a long soak polls cheaply."""

    settings: Settings
    topic: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _next: dict[int, int] = field(default_factory=dict)

    def follow(self) -> list[tuple[str, dict[str, Any]]]:
        replay = KafkaEventReplay(self.settings, AvroCodec())
        for partition in range(self.settings.layout.kafka):
            # Right after a broker restart a fresh client may not know a partition yet; the
            # owners retry such reads, and so does the audit. Progress is kept per batch.
            wait_for(partial(self._read, replay, partition), 60,
                     f"{self.topic}[{partition}] readable", interval=1.0)
        return self.events

    def _read(self, replay: KafkaEventReplay, partition: int) -> bool:
        try:
            for batch in replay.read(self.topic, partition, self._next.get(partition, 0)):
                self.events.extend((m.name, dict(m.record)) for m in batch)
                self._next[partition] = batch[-1].offset + 1
        except LogUnavailable as exc:
            print(f"\nlog follower: {exc}; trying again")
            return False
        return True


class EventTopics:
    """Run events, then job events: missed fire times are recorded on the job-events topic
    as ranges (JobFireTimesMissed)."""

    def __init__(self, settings: Settings) -> None:
        self._runs = LogFollower(settings, settings.run_events_topic)
        self._jobs = LogFollower(settings, settings.job_events_topic)

    def follow(self) -> list[tuple[str, dict[str, Any]]]:
        return [*self._runs.follow(), *self._jobs.follow()]
