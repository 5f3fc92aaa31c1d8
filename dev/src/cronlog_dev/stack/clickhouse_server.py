"""The local ClickHouse server from Debian's packages, configured for loopback only."""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from cronlog_dev.stack.process import (
    StackError,
    port_open,
    spawn,
    stop_pidfile,
    wait_until,
)


def _server_binary() -> str:
    for name in ("clickhouse-server", "clickhouse"):
        found = shutil.which(name)
        if found:
            return found
    raise StackError("clickhouse-server not found; run `make deps` (apt-get install clickhouse-server)")


@dataclass
class ClickHouseServer:
    state_dir: Path
    tcp_port: int
    http_port: int
    # The only user of the server; it needs this password on every port.
    password: str = field(default="", repr=False)
    user: str = "cronlog"

    def start(self) -> None:
        pidfile = self.state_dir / "clickhouse.pid"
        stop_pidfile(pidfile)
        if port_open(self.tcp_port):
            raise StackError(f"port {self.tcp_port} is taken by another process; cannot start ClickHouse")
        if not self.password:
            raise StackError("the local ClickHouse needs a password for its user")
        data = self.state_dir / "clickhouse-data"
        logs = self.state_dir / "clickhouse-logs"
        data.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        self.users_dir.mkdir(parents=True, exist_ok=True)
        config = self.state_dir / "clickhouse-config.xml"
        users = self.state_dir / "clickhouse-users.xml"
        for path, name in ((config, "clickhouse-server.xml"), (users, "clickhouse-users.xml")):
            template = importlib.resources.files("cronlog_dev.stack").joinpath(name).read_text()
            path.touch(mode=0o600)
            os.chmod(path, 0o600)
            path.write_text(
                template.replace("{tcp_port}", str(self.tcp_port))
                .replace("{user}", self.user)
                .replace("{password_sha256_hex}",
                         hashlib.sha256(self.password.encode()).hexdigest())
                .replace("{http_port}", str(self.http_port))
                .replace("{path}", f"{data}/")
                .replace("{log_dir}", str(logs))
                .replace("{users_config}", str(users))
            )
        binary = _server_binary()
        argv = [binary, f"--config-file={config}"]
        if binary.endswith("/clickhouse"):
            argv = [binary, "server", f"--config-file={config}"]
        log = self.state_dir / "clickhouse.log"
        spawn(argv, log, pidfile)
        wait_until(lambda: port_open(self.tcp_port), 90, "ClickHouse", logs / "clickhouse-server.err.log")

    @property
    def users_dir(self) -> Path:
        """The users.d folder the server reads beside its users file (clickhouse-users.d,
        as ClickHouse names the folder of a config file), where `cronlog provision` writes
        the analysts' users (CRONLOG_CLICKHOUSE_USERS_DIR)."""
        return self.state_dir / "clickhouse-users.d"

    def stop(self) -> None:
        stop_pidfile(self.state_dir / "clickhouse.pid")
