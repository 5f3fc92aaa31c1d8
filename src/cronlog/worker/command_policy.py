"""Which executables the `command` handler may start: the operator's allow list, pure.

A job's payload names the program, so without a fence any tenant could run anything the
worker's user can. The allow list is the worker operator's (CRONLOG_COMMAND_ALLOW); empty,
nothing runs. It decides on the program's absolute path only: what the program then does
with its arguments, environment and input is the program's (docs/handlers.md).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from dataclasses import dataclass

ALLOW_VARIABLE = "CRONLOG_COMMAND_ALLOW"
USER_VARIABLE = "CRONLOG_COMMAND_USER"
GRACE_VARIABLE = "CRONLOG_COMMAND_GRACE_SECONDS"
DEFAULT_GRACE_SECONDS = 10.0
# The error type of a refusal: a job's retry policy cannot change it (domain/policies.py).
NOT_ALLOWED = "CommandNotAllowed"


class CommandNotAllowed(Exception):
    """The program a payload names is not on the worker's allow list, or cannot be found."""


@dataclass(frozen=True)
class RunAs:
    """The user commands run as, with the groups and home directory it has on this host."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str


@dataclass(frozen=True)
class CommandPolicy:
    """allow: absolute paths or fnmatch globs on absolute paths; none admits nothing.
    run_as: None runs commands as the worker's own user. grace_seconds: how long a process
    group told to stop (SIGTERM) has before it is killed (SIGKILL)."""

    allow: tuple[str, ...] = ()
    run_as: RunAs | None = None
    grace_seconds: float = DEFAULT_GRACE_SECONDS

    def admits(self, path: str) -> bool:
        """Whether an absolute path matches an entry. fnmatch's `*` also matches `/`."""
        return any(fnmatch.fnmatchcase(path, entry) for entry in self.allow)

    def check(self, name: str, search_path: str,
              is_executable: Callable[[str], bool] | None = None,
              real_path: Callable[[str], str] = os.path.realpath) -> str:
        """The real path of the program `name` (argv[0]) stands for, if admitted.

        Admitted when the path as found, or the same with its symlinks resolved, matches an
        entry: `/bin/echo` allowed admits `/bin/echo` where /bin links to /usr/bin. The real
        path is what runs, so the program checked is the program started."""
        found = find_executable(name, search_path, is_executable or _is_executable_file)
        if found is None:
            where = "" if name.startswith("/") else f" in the worker's PATH ({search_path[:512]})"
            raise CommandNotAllowed(f"{name[:512]!r}: no executable file of that name{where}")
        real = real_path(found)
        if self.admits(real) or (".." not in found.split("/") and self.admits(found)):
            return real
        if not self.allow:
            raise CommandNotAllowed(f"{found} is not allowed: this worker allows no commands; "
                                    f"operators allow executables with {ALLOW_VARIABLE}")
        shown = found if real == found else f"{found} ({real})"
        raise CommandNotAllowed(f"{shown} is not allowed on this worker; operators allow "
                                f"executables with {ALLOW_VARIABLE}")


def find_executable(name: str, search_path: str,
                    is_executable: Callable[[str], bool]) -> str | None:
    """An absolute name as it is; a bare name looked up in the directories of search_path
    (relative ones skipped: they would depend on the worker's working directory); a
    relative name with a slash is refused by the payload check before this."""
    if name.startswith("/"):
        return name if is_executable(name) else None
    for folder in search_path.split(os.pathsep):
        if folder.startswith("/"):
            candidate = os.path.join(folder, name)
            if is_executable(candidate):
                return candidate
    return None


def parse_allow_list(text: str) -> tuple[str, ...]:
    """Comma-separated absolute paths or globs; raises ValueError naming a bad entry."""
    entries = tuple(e.strip() for e in text.split(",") if e.strip())
    for number, entry in enumerate(entries, 1):
        if not entry.startswith("/"):
            raise ValueError(f"entry {number} ({entry!r}) must be an absolute path or a glob "
                             "on absolute paths, such as /usr/local/bin/backup or /opt/jobs/*")
    return entries


def _is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
