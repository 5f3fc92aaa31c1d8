"""The `cronlog` command's env file (--env-file, CRONLOG_ENV_FILE): its values fill in what
the environment lacks, and a file that cannot be used is a usage error naming the file and
line, never a value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cronlog.infra.env_file import (
    MAX_ENV_FILE_BYTES,
    EnvFileError,
    env_file_named,
    fill_from_env_file,
    parse_env_file,
    read_env_file,
)

SECRET = "s3cr3t-hunter2"


def test_lines_are_names_and_values_as_written() -> None:
    text = ("# make run's\n\nCRONLOG_POSTGRES_DSN=postgresql://u:p=w#x@h:1/db\n"
            "  # indented comment\nCRONLOG_QUEUES=\nCRONLOG_TENANT_QUEUES=acme:a|b  \r\n")
    assert parse_env_file(text, "F") == {
        # Everything after the first '=' is the value: '=' and '#' are a password's too.
        "CRONLOG_POSTGRES_DSN": "postgresql://u:p=w#x@h:1/db",
        "CRONLOG_QUEUES": "",
        "CRONLOG_TENANT_QUEUES": "acme:a|b  ",
    }


@pytest.mark.parametrize(("text", "message"), [
    (f"CRONLOG_A=1\n{SECRET}\n", "F line 2: expected CRONLOG_NAME=value"),
    (f"PATH={SECRET}\n", "F line 1: the name before '=' must be a CRONLOG_* variable"),
    (f"export CRONLOG_A={SECRET}\n", "F line 1: the name before '='"),
    (f"CRONLOG_A ={SECRET}\n", "F line 1: the name before '='"),
    (f"cronlog_a={SECRET}\n", "F line 1: the name before '='"),
    (f"{SECRET}=CRONLOG_A\n", "F line 1: the name before '='"),
    (f"CRONLOG_ENV_FILE={SECRET}\n", "F line 1: CRONLOG_ENV_FILE cannot name another"),
    (f"CRONLOG_A=1\n#\nCRONLOG_A={SECRET}\n", "F line 3: CRONLOG_A is set twice (first on "
                                              "line 1)"),
])
def test_a_malformed_line_is_named_by_file_and_line_never_by_its_value(
        text: str, message: str) -> None:
    with pytest.raises(EnvFileError) as raised:
        parse_env_file(text, "F")
    assert str(raised.value).startswith(message)
    assert SECRET not in str(raised.value)


def test_a_missing_unreadable_huge_or_binary_file_is_an_error_naming_it(
        tmp_path: Path) -> None:
    missing = tmp_path / "missing.env"
    with pytest.raises(EnvFileError, match=f"^X {missing}: cannot read: No such file"):
        read_env_file(str(missing), f"X {missing}")
    with pytest.raises(EnvFileError, match="cannot read: Is a directory"):
        read_env_file(str(tmp_path), "X")
    huge = tmp_path / "huge.env"
    huge.write_text("#" * (MAX_ENV_FILE_BYTES + 1))
    with pytest.raises(EnvFileError, match="larger than"):
        read_env_file(str(huge), "X")
    binary = tmp_path / "binary.env"
    binary.write_bytes(b"CRONLOG_A=1\nCRONLOG_B=\xff" + SECRET.encode() + b"\n")
    with pytest.raises(EnvFileError) as raised:
        read_env_file(str(binary), "X")
    assert str(raised.value) == "X line 2: not UTF-8 text"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission_is_an_error_naming_it(tmp_path: Path) -> None:
    locked = tmp_path / "locked.env"
    locked.write_text("CRONLOG_A=1\n")
    locked.chmod(0)
    with pytest.raises(EnvFileError, match="cannot read: Permission denied"):
        read_env_file(str(locked), "X")


def test_the_option_names_the_file_before_the_variable_and_empty_is_unset() -> None:
    environ = {"CRONLOG_ENV_FILE": "from-env"}
    assert env_file_named(["--env-file", "opt", "audit", "job", "j"], environ) == (
        "opt", "--env-file opt")
    assert env_file_named(["--env-file=opt", "replay"], {}) == ("opt", "--env-file opt")
    assert env_file_named(["jobs", "list", "--address", "h:1"], environ) == (
        "from-env", "CRONLOG_ENV_FILE from-env")
    assert env_file_named(["replay"], {"CRONLOG_ENV_FILE": ""}) is None
    assert env_file_named(["replay"], {}) is None


def test_the_environment_wins_over_the_file_even_when_empty(tmp_path: Path) -> None:
    path = tmp_path / "cronlog.env"
    path.write_text("CRONLOG_PARTITIONS=16\nCRONLOG_TOPIC_PREFIX=file.\nCRONLOG_QUEUES=a\n")
    environ = {"CRONLOG_TOPIC_PREFIX": "env.", "CRONLOG_QUEUES": "", "HOME": "/h"}
    filled = fill_from_env_file(["--env-file", str(path), "replay"], environ)
    assert filled == ["CRONLOG_PARTITIONS"]
    assert environ == {"CRONLOG_TOPIC_PREFIX": "env.", "CRONLOG_QUEUES": "", "HOME": "/h",
                       "CRONLOG_PARTITIONS": "16"}


def cronlog(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", *argv],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def test_the_cronlog_command_takes_the_file_before_its_defaults_are_read(
        tmp_path: Path) -> None:
    """The client's --address default comes from CRONLOG_GRPC_ADDRESS: set by the file, it
    must be what a client command dials (here nothing listens, so the error names it)."""
    path = tmp_path / "cronlog.env"
    path.write_text("CRONLOG_GRPC_ADDRESS=127.0.0.1:1\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("CRONLOG_")}
    done = cronlog("--env-file", str(path), "jobs", "get", "x", env=base)
    assert "127.0.0.1:1" in done.stderr or "127.0.0.1:1" in done.stdout, done
    done = cronlog("--help", env={**base, "CRONLOG_ENV_FILE": str(path)})
    assert done.returncode == 0 and "--env-file" in done.stdout


def test_the_cronlog_command_refuses_a_bad_file_as_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "cronlog.env"
    path.write_text(f"CRONLOG_PARTITIONS=8\nCRONLOG_CLICKHOUSE_PASSWORD {SECRET}\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("CRONLOG_")}
    for argv, env in ((["--env-file", str(path), "replay"], base),
                      (["replay"], {**base, "CRONLOG_ENV_FILE": str(path)})):
        done = cronlog(*argv, env=env)
        assert done.returncode == 2
        assert f"{path} line 2: expected CRONLOG_NAME=value" in done.stderr
        assert SECRET not in done.stderr + done.stdout
    done = cronlog("--env-file", str(tmp_path / "nope.env"), "provision", "--print",
                   env=base)
    assert done.returncode == 2
    assert f"--env-file {tmp_path / 'nope.env'}: cannot read" in done.stderr
