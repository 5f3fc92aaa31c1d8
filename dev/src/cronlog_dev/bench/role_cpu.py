"""CPU core-seconds per 1,000 runs of each role of a workload: cronlog's scheduler(s),
worker(s) and projector, and the servers behind them (Kafka, PostgreSQL, ClickHouse).

Each role is a set of process trees, read from /proc through psutil: user + system time of
every live process of the tree, plus what its live members have reaped (a Postgres backend
that ended inside the window is in its postmaster's children times). CPU time, not wall
time, so the figure holds on a machine that other work shares; the servers' figures do
include whatever else those servers serve meanwhile (nothing else, on the bench's own
stack).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import psutil

from cronlog.infra.config import Settings
from cronlog_dev.bench.metrics_cost_figures import by_role, cpu_used

SERVERS = ("kafka", "postgres", "clickhouse")
SOURCE = ("user + system CPU seconds of each process tree (psutil, /proc/<pid>/stat, with "
          "the reaped children's times), from 1 s plus the lookahead before the window's "
          "first fire time to {tail:.0f} s after its last, divided by the window's runs that "
          "started; servers: the processes listening on the workload's Kafka, PostgreSQL and "
          "ClickHouse ports, with their children")


@dataclass
class RoleCpu:
    """What one window of a workload cost each role."""

    runs: int
    window_seconds: float
    # Core-seconds used in the window, by role ("scheduler" sums every scheduler).
    core_seconds: dict[str, float]
    # core_seconds per 1,000 runs started; the figure.
    per_1k_runs: dict[str, float]
    source: str
    notes: list[str] = field(default_factory=list)


def tree_cpu_seconds(pid: int) -> float | None:
    """user + system seconds of the process, its live descendants and what they reaped;
    None when the process is gone."""
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0.0
    for member in members:
        try:
            t = member.cpu_times()
        except psutil.Error:
            continue  # ended between the listing and the read: its parent reaps it
        total += t.user + t.system + t.children_user + t.children_system
    return total


def read_trees(pids: Mapping[str, int]) -> dict[str, float]:
    """Each named process tree's CPU seconds so far; trees that are gone are left out."""
    out: dict[str, float] = {}
    for name, pid in pids.items():
        seconds = tree_cpu_seconds(pid)
        if seconds is not None:
            out[name] = seconds
    return out


def _ports(settings: Settings) -> dict[str, set[int]]:
    kafka = {int(a.rsplit(":", 1)[1]) for a in settings.kafka_bootstrap.split(",")
             if ":" in a}
    postgres = postgres_port(settings.postgres_dsn)
    return {"kafka": kafka, "postgres": {postgres} if postgres else set(),
            "clickhouse": {settings.clickhouse_port}}


def postgres_port(dsn: str) -> int | None:
    """The port of a postgresql:// DSN (the server's default when it names none)."""
    host = dsn.split("@", 1)[-1].split("/", 1)[0]
    if host.startswith("["):
        host = host.split("]", 1)[-1]
    _, colon, port = host.rpartition(":")
    if not colon:
        return 5432
    return int(port) if port.isdigit() else None


def server_pids(settings: Settings,
                listeners: Callable[[], Iterable[tuple[int, int | None]]] | None = None
                ) -> dict[str, int]:
    """The pid of the process listening on each server's port ("kafka-2" for a second
    broker of a cluster): the server itself, whatever launched it. listeners: (port, pid)
    of every listening TCP socket; psutil's by default (root sees every process's)."""
    found: dict[str, int] = {}
    listening = list(listeners() if listeners is not None else _listening())
    for server, ports in _ports(settings).items():
        pids = sorted({pid for port, pid in listening if port in ports and pid is not None})
        for n, pid in enumerate(pids, start=1):
            found[server if n == 1 else f"{server}-{n}"] = pid
    return found


def _listening() -> list[tuple[int, int | None]]:
    try:
        return [(c.laddr.port, c.pid) for c in psutil.net_connections(kind="tcp")
                if c.status == psutil.CONN_LISTEN and c.laddr]
    except psutil.Error:
        return []


def per_thousand(core_seconds: Mapping[str, float], runs: int) -> dict[str, float]:
    if runs <= 0:
        return {}
    return {role: round(seconds / runs * 1000, 3) for role, seconds in core_seconds.items()}


class RoleCpuWindow:
    """Reads every role's CPU at a window's two edges, on a thread, while the workload
    waits for its runs: `begin` once the window is planned, `end` once its runs started."""

    def __init__(self, processes: Callable[[], Mapping[str, int]], tail_seconds: float
                 ) -> None:
        """processes: name -> pid of every process tree to read, asked at each edge (a
        restarted process is read under its new pid, its old time lost)."""
        self._processes = processes
        self._tail = tail_seconds
        self._stopped = threading.Event()
        self._reader: threading.Thread | None = None
        self._readings: list[tuple[float, dict[str, float]]] = []
        self.notes: list[str] = []

    def begin(self, first_due: float, seconds: int, lookahead: float) -> None:
        self.between(first_due - lookahead - 1.0, first_due + seconds + self._tail)

    def between(self, begins: float, ends: float) -> None:
        """Reads at two instants (time.time()) instead: for a load that holds steady across
        them, whose runs are then its rate times the window (`steady`)."""
        self._reader = threading.Thread(target=self._read, args=(begins, ends),
                                        name="role-cpu", daemon=True)
        self._reader.start()

    def _read(self, begins: float, ends: float) -> None:
        for at, edge in ((begins, "start"), (ends, "end")):
            late = time.time() - at
            if late < 0 and self._stopped.wait(-late):
                return
            if late > 0.5:
                self.notes.append(f"the CPU at the window's {edge} was read {late:.1f} s late")
            self._readings.append((time.time(), read_trees(self._processes())))

    def end(self, runs: int) -> RoleCpu | None:
        """Waits for the window's end to be read; None when it never was."""
        if self._reader is None:
            return None
        self._reader.join()
        if len(self._readings) < 2:
            return None
        (t0, before), (t1, after) = self._readings
        used = by_role(cpu_used(before, after))
        return RoleCpu(runs, round(t1 - t0, 1), used, per_thousand(used, runs),
                       SOURCE.format(tail=self._tail), list(self.notes))

    def steady(self, rate: float) -> RoleCpu | None:
        """Waits for the window's end; the runs are those of `rate` runs/s over the window
        as read (a steady load: what its runs cost whenever they were fired)."""
        if self._reader is None:
            return None
        self._reader.join()
        if len(self._readings) < 2:
            return None
        return self.end(round(rate * (self._readings[1][0] - self._readings[0][0])))

    def stop(self) -> None:
        self._stopped.set()


def cpu_notes(cpu: RoleCpu | None, servers: Mapping[str, int]) -> list[str]:
    """What a workload's notes say of its CPU per role: why it is missing, what was read
    late, and which servers were not seen."""
    notes = (["the CPU per role was not read (the window's end was never reached)"]
             if cpu is None else [f"CPU per role: {n}" for n in cpu.notes])
    unseen = [s for s in SERVERS if s not in servers]
    if unseen:
        notes.append(f"CPU of {', '.join(unseen)} not measured: no process seen listening "
                     "on its port (another user's processes need root to be seen)")
    return notes
