"""Start, watch and stop the local servers as child processes with pid files."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class StackError(RuntimeError):
    """A local server could not be installed, started or reached."""


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def wait_until(check: Callable[[], bool], timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    tail = ""
    if log is not None and log.exists():
        tail = "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    raise StackError(f"{what} did not become ready within {timeout:.0f}s{tail}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_pidfile(pidfile: Path, timeout: float = 30.0, sig: int = signal.SIGTERM) -> None:
    """Stops the process group recorded in a pid file left by an earlier start, if any."""
    if not pidfile.exists():
        return
    try:
        pid = int(pidfile.read_text().strip())
    except ValueError:
        pidfile.unlink(missing_ok=True)
        return
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)


def spawn(argv: Sequence[str], log: Path, pidfile: Path, env: dict[str, str] | None = None,
          user: str | None = None) -> subprocess.Popen[bytes]:
    """Starts argv in its own process group, output to log, and records its pid."""
    if user is not None and os.geteuid() == 0:
        argv = ["runuser", "-u", user, "--", *argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )
    pidfile.write_text(str(proc.pid))
    return proc


def run_checked(argv: Sequence[str], what: str, user: str | None = None,
                env: dict[str, str] | None = None) -> str:
    if user is not None and os.geteuid() == 0:
        argv = ["runuser", "-u", user, "--", *argv]
    result = subprocess.run(list(argv), capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise StackError(f"{what} failed ({result.returncode}): {result.stderr or result.stdout}")
    return result.stdout
