"""What `make run` starts beside the servers: every role with its operator endpoints on a
port of its own, and the web console; the variables each one gets, and the banner lines
that tell the addresses."""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass, field

from cronlog_dev.processes import ROLES

# Fixed rather than free ports: a Prometheus pointed at `make run` (the configuration it
# writes) and an operator's bookmarks keep working across restarts. Clear of the stack's own
# ports (local_stack.RUN_PORTS: 39092/39093 and a Kafka cluster's nodes 10 above each, up to
# 39173, 35432, 39000, 38123, 50051) and of `make test`'s (TEST_PORTS, 4xxxx).
RUN_METRICS_PORTS: dict[str, int] = {"api": 39081, "scheduler": 39082, "worker": 39083,
                                     "projector": 39084, "notifier": 39085}
RUN_CONSOLE_PORT = 38080
# Where the banner's `prometheus` command has Prometheus listen.
PROMETHEUS_PORT = 39090
CONSOLE = "console"


@dataclass(frozen=True)
class PlannedRole:
    """One process `make run` starts: its role, the variables it gets beyond the stack's
    settings, and where it answers over HTTP."""

    role: str
    host: str
    port: int
    setting: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def metrics_setting(role: str) -> str:
    return f"CRONLOG_{role.upper()}_METRICS_PORT"


def run_plan(metrics_host: str = "127.0.0.1",
             metrics_ports: dict[str, int] | None = None,
             console_port: int = RUN_CONSOLE_PORT) -> tuple[PlannedRole, ...]:
    ports = RUN_METRICS_PORTS if metrics_ports is None else metrics_ports
    missing = [role for role in ROLES if role not in ports]
    if missing:
        raise ValueError(f"no metrics port planned for {', '.join(missing)}")
    planned = [PlannedRole(role, metrics_host, ports[role], metrics_setting(role),
                           {metrics_setting(role): str(ports[role]),
                            # The banner names this host: an inherited one must not differ.
                            "CRONLOG_METRICS_HOST": metrics_host})
               for role in ROLES]
    # Loopback: the console in open mode (make run's api has no tokens) signs nobody in.
    console_address = f"127.0.0.1:{console_port}"
    planned.append(PlannedRole(CONSOLE, "127.0.0.1", console_port, "CRONLOG_CONSOLE_ADDRESS",
                               {"CRONLOG_CONSOLE_ADDRESS": console_address}))
    taken = [p.port for p in planned]
    if len(set(taken)) != len(taken):
        raise ValueError(f"two roles planned on one port: {taken}")
    return tuple(planned)


def shifted_plan(offset: int) -> tuple[PlannedRole, ...]:
    """The plan with every port moved by offset (CRONLOG_RUN_PORT_OFFSET, run.py)."""
    return run_plan(metrics_ports={role: port + offset
                                   for role, port in RUN_METRICS_PORTS.items()},
                    console_port=RUN_CONSOLE_PORT + offset)


def metrics_targets(plan: tuple[PlannedRole, ...]) -> dict[str, str]:
    """role -> host:port of the roles that serve /metrics (the console does not)."""
    return {p.role: p.address for p in plan if p.role != CONSOLE}


def banner(plan: tuple[PlannedRole, ...], prometheus_command: str = "") -> str:
    width = max(len(p.role) for p in plan)
    lines = ["Operator endpoints (docs/operations.md, Monitoring; scrape jobs cronlog-<role>):"]
    for p in plan:
        if p.role == CONSOLE:
            continue
        lines.append(f"  {p.role:<{width}}  metrics {p.url}/metrics  health {p.url}/healthz"
                     f"  ready {p.url}/readyz")
    if prometheus_command:
        lines.append(f"  Prometheus on them: {prometheus_command}")
    for p in plan:
        if p.role == CONSOLE:
            lines.append(f"Console: {p.url}/  (open mode: pick a tenant, no sign-in; "
                         f"health {p.url}/healthz)")
    return "\n".join(lines)


def unavailable(plan: tuple[PlannedRole, ...]) -> list[str]:
    """The planned ports something else listens on, each with the variable it comes from:
    said before anything starts, rather than as a role's exit in its log."""
    problems = []
    for p in plan:
        with socket.socket() as s:
            # As the roles' HTTP servers bind: a port a stopped run left in TIME_WAIT is free.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((p.host, p.port))
            except OSError as exc:
                why = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
                problems.append(f"{p.role}'s {p.setting} {p.address}: {why}")
    return problems
