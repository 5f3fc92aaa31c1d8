"""The command-line client's token: CRONLOG_TOKEN, or the file CRONLOG_TOKEN_FILE names;
a file that cannot hold a token is refused naming the variable, never showing its bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cronlog.cli.token import MAX_TOKEN_BYTES, TokenError, caller_token


def test_neither_variable_means_no_token() -> None:
    assert caller_token({}) is None
    assert caller_token({"CRONLOG_TOKEN": ""}) is None


def test_the_variable_is_the_token() -> None:
    assert caller_token({"CRONLOG_TOKEN": "alpha-123"}) == "alpha-123"


def test_the_file_is_the_token_without_its_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"alpha-123\n")
    assert caller_token({"CRONLOG_TOKEN_FILE": str(path)}) == "alpha-123"


def test_an_empty_token_variable_beside_the_file_is_no_conflict(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"alpha-123")
    assert caller_token({"CRONLOG_TOKEN": "", "CRONLOG_TOKEN_FILE": str(path)}) == "alpha-123"


@pytest.mark.parametrize(("content", "says"), [
    (b"", "holds no token"),
    (b" \n\n", "holds no token"),
    (b"alpha-123\nbeta-456\n", "more than one line or word"),
    (b"alpha 123", "more than one line or word"),
    (b"alpha-\x07123", "more than one line or word"),
    ("tök-en".encode(), "other than ASCII"),
    (b"x" * (MAX_TOKEN_BYTES + 1), f"more than {MAX_TOKEN_BYTES} bytes"),
])
def test_a_file_that_cannot_hold_a_token_is_refused(tmp_path: Path, content: bytes,
                                                     says: str) -> None:
    path = tmp_path / "token"
    path.write_bytes(content)
    with pytest.raises(TokenError, match="CRONLOG_TOKEN_FILE") as refused:
        caller_token({"CRONLOG_TOKEN_FILE": str(path)})
    assert says in str(refused.value)
    assert "alpha" not in str(refused.value) and "beta" not in str(refused.value)


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "absent"
    with pytest.raises(TokenError, match=f"CRONLOG_TOKEN_FILE {path}: cannot read"):
        caller_token({"CRONLOG_TOKEN_FILE": str(path)})


def test_both_variables_set_is_refused() -> None:
    with pytest.raises(TokenError, match="both set"):
        caller_token({"CRONLOG_TOKEN": "a", "CRONLOG_TOKEN_FILE": "/dev/null"})


def test_an_empty_file_variable_is_refused() -> None:
    with pytest.raises(TokenError, match="empty"):
        caller_token({"CRONLOG_TOKEN_FILE": ""})


def test_a_token_of_the_largest_size_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"t" * MAX_TOKEN_BYTES)
    assert caller_token({"CRONLOG_TOKEN_FILE": str(path)}) == "t" * MAX_TOKEN_BYTES


def test_the_cli_stops_with_a_usage_error_before_calling_the_api(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CRONLOG_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "cronlog.infra.entrypoints.cli",
         # Nothing listens there: an attempt to call would fail differently.
         "--address", "127.0.0.1:9", "jobs", "list"],
        capture_output=True, text=True, timeout=60,
        env={**env, "CRONLOG_TOKEN_FILE": str(tmp_path / "absent")})
    assert done.returncode == 2
    assert f"CRONLOG_TOKEN_FILE {tmp_path / 'absent'}: cannot read" in done.stderr
    assert done.stdout == ""
