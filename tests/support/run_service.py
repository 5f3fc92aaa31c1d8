"""`make run` as a test starts it: `cronlog-dev run` as a subprocess with the environment a
user would give it, on ports and a state folder of its own, so it meets neither a
developer's own `make run` nor the test session's servers.

    with run_service({"CRONLOG_PARTITIONS": "12"}) as service:
        service.grpc_address          # 127.0.0.1:30051 in a session without an offset
        service.env_file              # its .cronlog/run/cronlog.env
        service.port(50051)           # a documented port -> the one this run uses
        service.localize(command)     # a documented command -> one for this run

Ports: every port of the run (RUN_PORTS, the roles' metrics ports, the console, the
Prometheus command's, a Kafka cluster's nodes) is moved by `port_offset`, by default
RUN_SERVICE_PORT_BASE (-20000) plus the session's CRONLOG_TEST_PORT_OFFSET: 15432-19173 and
30051, clear of `make run`'s (35432-39173, 50051), of the test stack's (21092-25061 and
the test cluster's 28092-28173, each plus the session's offset), and below Linux's ephemeral
range (32768-60999), where the e2e services' free ports come from.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cronlog_dev.run import ENV_FILE_NAME
from cronlog_dev.run_plan import PROMETHEUS_PORT, RUN_CONSOLE_PORT, RUN_METRICS_PORTS
from cronlog_dev.run_settings import PORT_OFFSET_VARIABLE
from cronlog_dev.stack.local_stack import RUN_PORTS, LocalStack, shifted
from tests.conftest import ROOT
from tests.support.polling import wait_for

RUN_SERVICE_PORT_BASE = -20000
BANNER = "cronlog is running."
# A first start may wait for another launcher's install of the Kafka jars.
READY_WITHIN = 900.0
# The launcher stops every role (each within 20 s) and then the servers.
STOP_WITHIN = 120.0
MAX_KAFKA_NODES = 9  # CRONLOG_KAFKA_BROKERS's most; node i listens 10 * (i - 1) above node 1


def documented_ports() -> dict[str, int]:
    """Every port `make run` uses as the README and docs give it, by name."""
    ports = {"kafka": RUN_PORTS.kafka, "kafka_controller": RUN_PORTS.kafka_controller,
             "postgres": RUN_PORTS.postgres, "clickhouse": RUN_PORTS.clickhouse_tcp,
             "clickhouse_http": RUN_PORTS.clickhouse_http, "grpc": RUN_PORTS.grpc,
             "console": RUN_CONSOLE_PORT, "prometheus": PROMETHEUS_PORT,
             **{f"{role}_metrics": port for role, port in RUN_METRICS_PORTS.items()}}
    for node in range(2, MAX_KAFKA_NODES + 1):
        ports[f"kafka_{node}"] = RUN_PORTS.kafka + 10 * (node - 1)
        ports[f"kafka_controller_{node}"] = RUN_PORTS.kafka_controller + 10 * (node - 1)
    return ports


def run_service_port_offset() -> int:
    """The offset of this test session's `make run`: two sessions (CRONLOG_TEST_PORT_OFFSET
    0 and 200) each get their own."""
    return RUN_SERVICE_PORT_BASE + int(os.environ.get("CRONLOG_TEST_PORT_OFFSET", "0"))


def launcher_environment(env: Mapping[str, str], port_offset: int,
                         state_root: Path) -> dict[str, str]:
    """This process's environment without its CRONLOG_* variables (the test session's own),
    then env, then where the run goes."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CRONLOG_")}
    return {**inherited, **env, "CRONLOG_STATE_DIR": str(state_root),
            PORT_OFFSET_VARIABLE: str(port_offset)}


def launcher_command() -> list[str]:
    return [str(Path(sys.executable).parent / "cronlog-dev"), "run"]


@dataclass
class RunService:
    process: subprocess.Popen[bytes]
    port_offset: int
    state_root: Path
    env: dict[str, str]  # what the launcher was started with
    output: Path  # its standard output and error
    ports: dict[str, int] = field(init=False)  # name -> the port this run uses

    def __post_init__(self) -> None:
        self.ports = {name: port + self.port_offset
                      for name, port in documented_ports().items()}

    @property
    def run_dir(self) -> Path:
        """The run's state folder: what `.cronlog/run` is for `make run`."""
        return self.state_root / "run"

    @property
    def env_file(self) -> Path:
        return self.run_dir / ENV_FILE_NAME

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

    @property
    def banner(self) -> str:
        return self.output.read_text(errors="replace")

    def port(self, documented: int) -> int:
        if documented not in documented_ports().values():
            raise KeyError(f"{documented} is not a port `make run` uses")
        return documented + self.port_offset

    def localize(self, text: str) -> str:
        """A documented command made to work on this run: its ports moved, `.cronlog/run`
        made this run's folder."""
        known = "|".join(str(p) for p in sorted(documented_ports().values()))
        text = re.sub(rf"(?<!\d)({known})(?!\d)",
                      lambda m: str(int(m.group(1)) + self.port_offset), text)
        return re.sub(r"(?<![\w./-])\.cronlog/run(?=/|\b)", str(self.run_dir), text)

    def cli_env(self, **extra: str) -> dict[str, str]:
        """An operator's shell after the banner's `export CRONLOG_ENV_FILE=...`: no other
        CRONLOG_* variable."""
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("CRONLOG_")}
        return {**inherited, "CRONLOG_ENV_FILE": str(self.env_file), **extra}

    def role_pids(self) -> dict[str, int]:
        """The launcher's cronlog children by role (api, scheduler, worker, projector,
        console)."""
        roles: dict[str, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                # The command name may hold spaces and parentheses; the ppid follows it.
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
                if ppid == self.process.pid and "cronlog.infra.entrypoints.cli" in argv:
                    roles[[a for a in argv if a][-1]] = int(entry.name)
        return roles

    def role_environ(self, role: str) -> dict[str, str]:
        """The environment the role was started with, as the kernel kept it."""
        raw = Path(f"/proc/{self.role_pids()[role]}/environ").read_bytes()
        pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0")
                 if item)
        return {name: value for name, _, value in pairs}


def _stack(state_root: Path, port_offset: int, env: Mapping[str, str]) -> LocalStack:
    brokers = int(env.get("CRONLOG_KAFKA_BROKERS", "") or "1")
    return LocalStack(state_root / "run", shifted(RUN_PORTS, port_offset), brokers=brokers)


def _stop(service: RunService) -> None:
    """Ctrl-C, as a user stops `make run`; killed, with its servers, if it does not end."""
    if service.process.poll() is None:
        service.process.send_signal(signal.SIGINT)
        try:
            service.process.wait(STOP_WITHIN)
        except subprocess.TimeoutExpired:
            service.process.kill()
            service.process.wait(10)
    # Servers by their pid files: a launcher killed mid-start leaves them otherwise.
    _stack(service.state_root, service.port_offset, service.env).stop()


@contextlib.contextmanager
def run_service(env: Mapping[str, str] | None = None, *, port_offset: int | None = None,
                state_root: Path | None = None,
                ready_within: float = READY_WITHIN) -> Iterator[RunService]:
    """`cronlog-dev run` with env (CRONLOG_* settings as a user sets them), started afresh
    on an empty state folder, yielded once its banner is printed (the api SERVING), and
    stopped with SIGINT at the end."""
    offset = run_service_port_offset() if port_offset is None else port_offset
    root = state_root or ROOT / ".cronlog" / f"run-service{offset:+d}"
    given = dict(env or {})
    _stack(root, offset, given).stop()  # left by a crashed earlier session, if any
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    output = root / "launcher.log"
    environ = launcher_environment(given, offset, root)
    with output.open("wb") as out:
        process = subprocess.Popen(launcher_command(), env=environ, cwd=ROOT, stdout=out,
                                   stderr=subprocess.STDOUT)
    service = RunService(process, offset, root, environ, output)
    try:
        def ready() -> bool:
            if BANNER in service.banner:
                return True
            if process.poll() is not None:
                raise AssertionError(f"cronlog-dev run exited with {process.returncode}:\n"
                                     f"{service.banner[-4000:]}")
            return False

        wait_for(ready, ready_within, f"`cronlog-dev run` printing its banner ({output})",
                 interval=0.5)
        yield service
    finally:
        _stop(service)
