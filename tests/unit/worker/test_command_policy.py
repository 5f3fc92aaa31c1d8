"""The `command` handler's allow list: which program a name stands for, and whether the
operator allows it (pure: the file system is given as functions)."""

from __future__ import annotations

import pytest

from cronlog.domain.policies import NEVER_RETRIED_ERRORS, RetryPolicy
from cronlog.worker.command_policy import (
    NOT_ALLOWED,
    CommandNotAllowed,
    CommandPolicy,
    find_executable,
    parse_allow_list,
)

FILES = {"/usr/bin/echo", "/usr/local/bin/backup", "/opt/jobs/nightly/run",
         "/usr/bin/dash", "/bin/sh"}
LINKS = {"/bin/sh": "/usr/bin/dash", "/usr/local/bin/echo-link": "/usr/bin/echo"}
PATH = "/usr/local/bin:relative/bin:/usr/bin:/bin"


def exists(path: str) -> bool:
    return path in FILES or path in LINKS


def real(path: str) -> str:
    return LINKS.get(path, path)


def check(policy: CommandPolicy, name: str) -> str:
    return policy.check(name, PATH, is_executable=exists, real_path=real)


def test_a_bare_name_is_found_in_the_first_absolute_folder_of_path() -> None:
    assert find_executable("echo", PATH, exists) == "/usr/bin/echo"
    assert find_executable("backup", PATH, exists) == "/usr/local/bin/backup"
    assert find_executable("nothing", PATH, exists) is None
    # Relative folders are skipped: they would depend on the worker's working directory.
    assert find_executable("run", "relative/bin", lambda p: True) is None
    assert find_executable("/usr/bin/echo", "", exists) == "/usr/bin/echo"


@pytest.mark.parametrize(("allow", "name", "runs"), [
    (("/usr/bin/echo",), "echo", "/usr/bin/echo"),
    (("/usr/bin/echo",), "/usr/bin/echo", "/usr/bin/echo"),
    (("/usr/local/bin/*",), "backup", "/usr/local/bin/backup"),
    # fnmatch's * also matches /, as documented.
    (("/opt/jobs/*",), "/opt/jobs/nightly/run", "/opt/jobs/nightly/run"),
    # The path as named, or with its symlinks resolved; the real one runs.
    (("/bin/sh",), "/bin/sh", "/usr/bin/dash"),
    (("/usr/bin/dash",), "/bin/sh", "/usr/bin/dash"),
    (("/nowhere", "/usr/bin/e?ho"), "echo", "/usr/bin/echo"),
])
def test_an_allowed_program_is_admitted_and_its_real_path_runs(
        allow: tuple[str, ...], name: str, runs: str) -> None:
    assert check(CommandPolicy(allow), name) == runs


@pytest.mark.parametrize(("allow", "name", "says"), [
    ((), "echo", "/usr/bin/echo is not allowed: this worker allows no commands"),
    (("/usr/bin/echo",), "backup", "/usr/local/bin/backup is not allowed on this worker"),
    (("/usr/bin/echo",), "/bin/sh", "/bin/sh (/usr/bin/dash) is not allowed"),
    (("/usr/bin/ech",), "echo", "is not allowed"),
    (("/usr/bin/echo",), "nothing", "'nothing': no executable file of that name in the "
                                    "worker's PATH"),
    (("/usr/bin/*",), "/usr/bin/nothing", "'/usr/bin/nothing': no executable file of that "
                                          "name"),
])
def test_anything_else_is_refused_naming_the_program_and_the_setting(
        allow: tuple[str, ...], name: str, says: str) -> None:
    with pytest.raises(CommandNotAllowed) as error:
        check(CommandPolicy(allow), name)
    assert says in str(error.value)
    if "no executable file" not in says:
        assert "CRONLOG_COMMAND_ALLOW" in str(error.value)


def test_the_dotted_path_is_refused_though_lexically_inside_the_allowed_folder() -> None:
    files = {"/usr/local/bin/../../bin/sh"}
    policy = CommandPolicy(("/usr/local/bin/*",))
    with pytest.raises(CommandNotAllowed):
        policy.check("/usr/local/bin/../../bin/sh", "", is_executable=files.__contains__,
                     real_path=lambda p: "/usr/bin/dash")


def test_the_allow_list_takes_absolute_paths_and_globs_only() -> None:
    assert parse_allow_list(" /usr/bin/echo, /opt/jobs/* ,,") == ("/usr/bin/echo", "/opt/jobs/*")
    assert parse_allow_list("") == ()
    with pytest.raises(ValueError, match=r"entry 2 \('echo'\) must be an absolute path"):
        parse_allow_list("/usr/bin/env,echo")


def test_a_refused_command_is_never_retried_whatever_the_job_says() -> None:
    assert NOT_ALLOWED in NEVER_RETRIED_ERRORS
    assert not RetryPolicy(max_attempts=5).retries(1, NOT_ALLOWED)
    assert RetryPolicy(max_attempts=5).retries(1, "exit status 3")
    assert not RetryPolicy(max_attempts=5, non_retryable_errors=("exit status 3",)).retries(
        1, "exit status 3")
