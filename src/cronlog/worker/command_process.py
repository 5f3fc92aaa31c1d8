"""Running one command in a process group of its own, and leaving nothing of the group behind.

The process starts a new session (`start_new_session`), so it and everything it starts
share a process group whose id is its pid, apart from the worker's. The group is ended
whenever the attempt is told to stop (timeout, cancel) and also when the first process
exits while others of its group still run (a command that backgrounds a child): SIGTERM to
the group, SIGKILL after the grace. On any other way out (an exception, the worker stopping
the handler by force) the group gets SIGKILL at once.

The pipes are read in this thread with a selector, keeping only their tails: no deadlock on
a full pipe, no memory beyond the tails. A process that leaves the group on purpose
(`setsid` of its own) escapes; only a dedicated user or a container contains that
(docs/handlers.md). So does a group whose handler is stopped by force before `Popen` has
returned its pid: the worker forces a stop only a cancel grace after telling it, by
when a handler not starved for that long is supervising.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cronlog.worker.command_output import Tail
from cronlog.worker.command_policy import RunAs

log = logging.getLogger(__name__)

# How often the group and the stop event are looked at when the pipes are quiet; a worker's
# forced stop arrives between two looks (worker/attempt_stop.py).
POLL_SECONDS = 0.05
# After SIGKILL: how long the group may take to be gone before the attempt ends anyway.
KILL_WAIT_SECONDS = 5.0
# After the group is gone: how long output still buffered in the pipes is read.
DRAIN_SECONDS = 1.0
_READ_BYTES = 64 * 1024
_WRITE_BYTES = 16 * 1024


@dataclass(frozen=True)
class Finished:
    """How the first process of the group ended: its exit status, or -N for signal N, or
    None when it outlived SIGKILL's wait; whether it was told to stop before it ended."""

    returncode: int | None
    stopped: bool
    stdout: Tail
    stderr: Tail


def signal_group(pgid: int, signum: int) -> bool:
    """False when no process of the group is left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # members that changed user; still there
        return True
    return True


def live_members(pgid: int, proc: str = "/proc") -> bool | None:
    """Whether a process of the group is alive and not a zombie, from /proc; None without
    /proc. A zombie (dead, not yet reaped by its new parent, which in a container may be
    slow to do it) counts for kill() but runs nothing; nor does a process with SIGKILL
    pending, which exits the next time it gets the CPU (a starved machine may take a while
    to give it). One read of every process's stat, and of the members' status."""
    try:
        pids = [name for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/stat", "rb") as stat:
                # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z" \
                and not _kill_pending(f"{proc}/{pid}/status"):
            return True
    return False


# SIGKILL's bit in /proc/<pid>/status's signal masks (bit n-1 for signal n).
_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def _kill_pending(status_path: str) -> bool:
    """Whether SIGKILL waits for the process (sent to it or to its thread group)."""
    try:
        with open(status_path, "rb") as status:
            for line in status:
                if line.startswith((b"SigPnd:", b"ShdPnd:")) \
                        and int(line.split()[1], 16) & _SIGKILL_BIT:
                    return True
    except (OSError, ValueError, IndexError):
        return False
    return False


def group_alive(pgid: int) -> bool:
    """Whether anything of the group still runs."""
    if not signal_group(pgid, 0):
        return False
    live = live_members(pgid)
    return True if live is None else live


class _Pipes:
    """The process's stdout and stderr read, its stdin written, never blocking."""

    def __init__(self, process: subprocess.Popen[bytes], stdin: bytes) -> None:
        self._selector = selectors.DefaultSelector()
        self.stdout, self.stderr = Tail(), Tail()
        self._files = [f for f in (process.stdout, process.stderr, process.stdin) if f]
        for pipe, tail in ((process.stdout, self.stdout), (process.stderr, self.stderr)):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            self._selector.register(pipe.fileno(), selectors.EVENT_READ, tail)
        self._pending = memoryview(stdin)
        self._stdin = process.stdin
        if process.stdin is not None:
            os.set_blocking(process.stdin.fileno(), False)
            self._selector.register(process.stdin.fileno(), selectors.EVENT_WRITE, None)

    @property
    def open(self) -> bool:
        return bool(self._selector.get_map())

    def pump(self, timeout: float) -> None:
        if not self.open:
            time.sleep(timeout)  # nothing to wait on but time: the group is looked at next
            return
        for key, _ in self._selector.select(timeout):
            fd = int(key.fd)
            if key.data is None:
                self._write(fd)
                continue
            try:
                chunk = os.read(fd, _READ_BYTES)
            except BlockingIOError:
                continue
            if chunk:
                key.data.add(chunk)
            else:
                self._selector.unregister(fd)

    def _write(self, fd: int) -> None:
        try:
            written = os.write(fd, self._pending[:_WRITE_BYTES])
        except BlockingIOError:
            return
        except BrokenPipeError:  # the process does not read its input: it need not
            written = len(self._pending)
        self._pending = self._pending[written:]
        if not self._pending:
            self._selector.unregister(fd)
            if self._stdin is not None:
                # The end of its input: a process reading to the end goes on.
                self._stdin.close()

    def drain(self, seconds: float) -> None:
        """Reads what the gone group left in the pipes, for at most `seconds`: a process
        that escaped the group may hold a pipe open for ever."""
        deadline = time.monotonic() + seconds
        while self.open and time.monotonic() < deadline:
            self.pump(POLL_SECONDS)

    def close(self) -> None:
        self._selector.close()
        for file in self._files:
            with contextlib.suppress(OSError):
                file.close()


def _supervise(process: subprocess.Popen[bytes], pipes: _Pipes, grace: float,
               stop: threading.Event) -> bool:
    """Pumps the pipes until the group is gone; whether it was told to stop first. At most
    the process's own time, then grace + KILL_WAIT_SECONDS."""
    pgid = process.pid
    term_at: float | None = None
    killed_at: float | None = None
    stopped = False
    while True:
        pipes.pump(POLL_SECONDS)
        ended = process.poll() is not None
        now = time.monotonic()
        if term_at is None:
            if not (ended or stop.is_set()):
                continue
            stopped = not ended
            term_at = now
            if not signal_group(pgid, signal.SIGTERM) and ended:
                return stopped
        elif killed_at is None and now >= term_at + grace:
            signal_group(pgid, signal.SIGKILL)
            killed_at = now
        if ended and not group_alive(pgid):
            return stopped
        if killed_at is not None and now >= killed_at + KILL_WAIT_SECONDS:
            log.warning("process group %d still there %.0f s after SIGKILL", pgid,
                        KILL_WAIT_SECONDS)
            return stopped


def run_in_group(argv: Sequence[str], executable: str, env: Mapping[str, str],
                 cwd: str | None, stdin: bytes, run_as: RunAs | None, grace: float,
                 stop: threading.Event) -> Finished:
    """Runs argv (argv[0] as given, `executable` the file started) until its group is gone.
    OSError: it could not be started (no such cwd, not permitted)."""
    user_args: dict[str, object] = {}
    if run_as is not None:
        user_args = {"user": run_as.uid, "group": run_as.gid,
                     "extra_groups": list(run_as.groups)}
    process = subprocess.Popen(
        list(argv), executable=executable, env=dict(env), cwd=cwd, start_new_session=True,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, close_fds=True, **user_args)  # type: ignore[call-overload]
    done = False
    pipes: _Pipes | None = None
    try:
        # Inside the try: a forced stop landing while the pipes are set up still kills the
        # group on the way out.
        pipes = _Pipes(process, stdin)
        stopped = _supervise(process, pipes, grace, stop)
        pipes.drain(DRAIN_SECONDS)
        done = True
        return Finished(process.poll(), stopped, pipes.stdout, pipes.stderr)
    finally:
        if not done:
            _kill_and_reap(process)
        if pipes is not None:
            pipes.close()


# How often the group is killed again when a forced stop lands in the kill itself.
KILL_TRIES = 3


def _kill_and_reap(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the group and the leader reaped, on the way out of an exception. The
    worker repeats a forced stop while the handler's thread runs (worker/running_attempts.py):
    on a loaded machine the next one can land here, before the kill (the group would outlive
    the attempt) or in the wait (the leader would stay a zombie). Each landing costs a try;
    the exception that brought the call here goes on."""
    for _ in range(KILL_TRIES):
        try:
            signal_group(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(KILL_WAIT_SECONDS)
            return
        except BaseException:  # a forced stop again, see above
            continue
