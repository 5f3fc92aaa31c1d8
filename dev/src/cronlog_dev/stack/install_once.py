"""Installing something into a shared cache folder, safe when several launchers do it at
once: a cluster's three nodes, a test session's stack beside its cluster, two test sessions.

One installs under an exclusive lock while the others wait for it; the install is built in
a folder of its own and renamed into place only when complete, so a half-finished install
(a crash, a failed download) is never taken for a finished one, and the next launcher
starts it again from nothing."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from cronlog_dev.stack.process import StackError

# The marker a finished install carries; its absence means "not installed".
COMPLETE = ".complete"
# How long a launcher waits for another's install: a cold Maven resolution of Kafka's jars
# takes about a minute here, so this is a hung install, not a slow one.
LOCK_WAIT_S = 15 * 60
_POLL_S = 0.2


def cache_root() -> Path:
    """Where installs are cached: CRONLOG_CACHE_DIR, or the checkout's own `.cronlog/cache`.

    Inside the checkout by default so that a fresh clone is a fresh machine: CI's clean
    clone installs everything again every time, and a cache in the user's home can never
    hide a broken install path (issue 32)."""
    configured = os.environ.get("CRONLOG_CACHE_DIR", "").strip()
    if configured:
        return Path(configured).resolve()
    checkout = Path(__file__).resolve().parents[4]
    if (checkout / "dev" / "pyproject.toml").is_file():
        return checkout / ".cronlog" / "cache"
    # cronlog-dev installed from a wheel rather than from a checkout.
    return Path.home() / ".cache" / "cronlog"


def is_installed(target: Path) -> bool:
    return (target / COMPLETE).is_file()


@contextlib.contextmanager
def exclusive(lock_file: Path, what: str, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Holds an exclusive flock on lock_file. flock, not fcntl's record locks: two threads of
    one process opening the file each get a lock of their own, so a cluster's nodes started
    from threads exclude each other too; the kernel drops it when the holder dies."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StackError(f"waited {wait_s:.0f}s for another launcher's {what}; "
                                     f"{lock_file} is still locked") from None
                time.sleep(_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def install_once(target: Path, install: Callable[[Path], None], what: str) -> Path:
    """target, installed by install(folder) unless a complete install is there already.

    install fills the empty folder it is given; it is called at most once among all the
    launchers that ask at the same time, and its folder becomes target only after it
    returned. A failed install leaves target as it was (absent) and raises."""
    if is_installed(target):
        return target
    with exclusive(target.parent / f".{target.name}.lock", what):
        if is_installed(target):  # another launcher finished it while this one waited
            return target
        # Under the lock no other install is under way: a partial folder is a killed one's.
        for stale in target.parent.glob(f".{target.name}.partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        building = target.parent / f".{target.name}.partial-{uuid.uuid4().hex[:8]}"
        building.mkdir(parents=True)
        try:
            install(building)
            (building / COMPLETE).write_text(what)
            # A folder without the marker is a crashed install of an older launcher.
            shutil.rmtree(target, ignore_errors=True)
            building.rename(target)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return target
