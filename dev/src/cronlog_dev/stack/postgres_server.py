"""The local PostgreSQL server from Debian's packages, in a data folder of the stack's own."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cronlog_dev.stack.process import (
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
# Written on every start: network clients must prove the password; the server has no Unix
# socket (unix_socket_directories is empty), so the local line only matters if one is added.
_HBA = """# cronlog local stack: written by the launcher at every start
local all all peer
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
"""


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
    # The `user` role's password (hex); every connection over TCP needs it.
    password: str = field(default="", repr=False)

    @property
    def dsn(self) -> str:
        return self._dsn(self.database)

    def _dsn(self, database: str) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

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
        if not self.password:
            raise StackError("the local PostgreSQL needs a password for its role")
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            if owner:
                shutil.chown(data, owner, owner)
            run_checked([str(bin_dir / "initdb"), "-D", str(data), "-U", self.user,
                         "--auth-local=peer", "--auth-host=scram-sha-256",
                         "-E", "UTF8", "--no-sync"], "initdb", user=owner)
        self._require_password(bin_dir, data, owner)
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

    def _require_password(self, bin_dir: Path, data: Path, owner: str | None) -> None:
        """Sets the role's password in single-user mode (no network involved) and writes the
        host-based rules. Done at every start, so a data folder made before the stack had
        passwords, or whose secrets folder was removed, ends up locked with the current one."""
        (data / "pg_hba.conf").write_text(_HBA)
        if owner:
            shutil.chown(data / "pg_hba.conf", owner, owner)
        argv = [str(bin_dir / "postgres"), "--single", "-D", str(data),
                "-c", "password_encryption=scram-sha-256", "postgres"]
        if owner:
            argv = ["runuser", "-u", owner, "--", *argv]
        # The password goes in on stdin, never on a command line others can read.
        result = subprocess.run(argv, capture_output=True, text=True, check=False,
                                input=f"ALTER ROLE \"{self.user}\" WITH PASSWORD "
                                      f"'{self.password}'\n")
        # A single-user backend exits 0 even when the statement failed: its log says.
        errors = [line.replace(self.password, "***") for line in result.stderr.splitlines()
                  if "ERROR:" in line or "FATAL:" in line]
        if result.returncode != 0 or errors:
            raise StackError(f"setting the PostgreSQL password failed ({result.returncode}): "
                             + "; ".join(errors))

    def _ensure_database(self, bin_dir: Path) -> None:
        import psycopg

        admin = self._dsn("postgres")

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
