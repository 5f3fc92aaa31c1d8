"""The local PostgreSQL server from Debian's packages, in a data folder of the stack's own."""

from __future__ import annotations

import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from cronlog.infra.stack.process import (
    StackError,
    port_open,
    run_checked,
    spawn,
    stop_pidfile,
    wait_until,
)

_PG_BIN_CANDIDATES = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin",
                      "/usr/lib/postgresql/17/bin")
# PostgreSQL refuses to run as root; the Debian package creates this system user.
_RUN_AS = "postgres"


def _pg_bin() -> Path:
    for candidate in _PG_BIN_CANDIDATES:
        if (Path(candidate) / "postgres").exists():
            return Path(candidate)
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    raise StackError("PostgreSQL server binaries not found; run `make deps` (apt-get install postgresql)")


@dataclass
class PostgresServer:
    state_dir: Path
    port: int
    user: str = "cronlog"
    database: str = "cronlog"

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def _as_owner(self) -> str | None:
        return _RUN_AS if os.geteuid() == 0 else None

    def start(self) -> None:
        bin_dir = _pg_bin()
        data = self.state_dir / "pg-data"
        pidfile = self.state_dir / "postgres.pid"
        stop_pidfile(pidfile, sig=signal.SIGINT)
        if port_open(self.port):
            raise StackError(f"port {self.port} is taken by another process; cannot start PostgreSQL")
        owner = self._as_owner()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            if owner:
                shutil.chown(data, owner, owner)
            run_checked([str(bin_dir / "initdb"), "-D", str(data), "-U", self.user,
                         "--auth=trust", "-E", "UTF8", "--no-sync"], "initdb", user=owner)
        log = self.state_dir / "postgres.log"
        if owner:
            log.touch()
            shutil.chown(log, owner, owner)
        spawn([str(bin_dir / "postgres"), "-D", str(data), "-p", str(self.port),
               "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
               "-c", "fsync=on", "-c", "max_connections=200",
               "-c", "shared_buffers=256MB"], log, pidfile, user=owner)
        wait_until(lambda: port_open(self.port), 60, "PostgreSQL", log)
        self._ensure_database(bin_dir)

    def _ensure_database(self, bin_dir: Path) -> None:
        import psycopg

        admin = f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

        def ready() -> bool:
            try:
                with psycopg.connect(admin, connect_timeout=2):
                    return True
            except psycopg.OperationalError:
                return False

        wait_until(ready, 60, "PostgreSQL connections", self.state_dir / "postgres.log")
        with psycopg.connect(admin, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (self.database,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{self.database}"')

    def stop(self) -> None:
        # SIGINT is PostgreSQL's fast shutdown; SIGTERM would wait for every client to leave.
        stop_pidfile(self.state_dir / "postgres.pid", sig=signal.SIGINT)
