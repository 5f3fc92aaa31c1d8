"""The `command` handler's payload: each field checked and bounded, a bad one named."""

from __future__ import annotations

import json

import pytest

from cronlog.worker.command_payload import (
    MAX_ARGV_ITEMS,
    MAX_ENV_ENTRIES,
    MAX_ITEM_BYTES,
    MAX_STDIN_BYTES,
    CommandRequest,
    parse_command_payload,
)
from cronlog.worker.handler_context import PayloadError


def parse(payload: object) -> CommandRequest:
    return parse_command_payload(json.dumps(payload).encode())


def test_a_full_payload_is_read() -> None:
    request = parse({"argv": ["/usr/bin/backup", "--all"], "env": {"MODE": "full"},
                     "cwd": "/srv", "stdin": "héllo"})
    assert request == CommandRequest(("/usr/bin/backup", "--all"), {"MODE": "full"}, "/srv",
                                     "héllo".encode())


def test_only_argv_is_required() -> None:
    assert parse({"argv": ["echo"]}) == CommandRequest(("echo",), {}, None, b"")


def test_items_at_their_bounds_are_accepted() -> None:
    request = parse({"argv": ["echo"] + ["x" * MAX_ITEM_BYTES] * (MAX_ARGV_ITEMS - 1),
                     "env": {f"V{i}": "y" * MAX_ITEM_BYTES for i in range(MAX_ENV_ENTRIES)},
                     "stdin": "z" * MAX_STDIN_BYTES})
    assert len(request.argv) == MAX_ARGV_ITEMS and len(request.env) == MAX_ENV_ENTRIES
    assert len(request.stdin) == MAX_STDIN_BYTES


@pytest.mark.parametrize(("payload", "named"), [
    ({}, "'argv' is required"),
    ({"argv": []}, "'argv' must be a list of 1 to 256"),
    ({"argv": "echo hi"}, "'argv' must be a list"),
    ({"argv": ["echo"] * (MAX_ARGV_ITEMS + 1)}, "'argv' must be a list of 1 to 256"),
    ({"argv": ["echo", 3]}, "'argv[1]' must be a string"),
    ({"argv": ["echo", "x" * (MAX_ITEM_BYTES + 1)]}, "'argv[1]' is longer than 4096 bytes"),
    # Multi-byte characters count as their bytes.
    ({"argv": ["echo", "é" * (MAX_ITEM_BYTES // 2 + 1)]}, "'argv[1]' is longer"),
    ({"argv": ["echo", "a\0b"]}, "'argv[1]' must not contain NUL"),
    ({"argv": ["echo", "\ud800"]}, "'argv[1]' must be valid Unicode text"),
    ({"argv": [""]}, "'argv[0]' must be an absolute path or a bare name"),
    ({"argv": ["bin/echo"]}, "'argv[0]' must be an absolute path or a bare name"),
    ({"argv": ["./echo"]}, "'argv[0]' must be an absolute path or a bare name"),
    ({"argv": ["echo"], "env": ["A=1"]}, "'env' must be an object"),
    ({"argv": ["echo"], "env": {f"V{i}": "" for i in range(MAX_ENV_ENTRIES + 1)}},
     "'env' must be an object of at most 64"),
    ({"argv": ["echo"], "env": {"1A": "x"}}, "'env' name '1A' must match"),
    ({"argv": ["echo"], "env": {"A-B": "x"}}, "'env' name 'A-B' must match"),
    ({"argv": ["echo"], "env": {"A": 1}}, "'env.A' must be a string"),
    ({"argv": ["echo"], "env": {"A": "x" * (MAX_ITEM_BYTES + 1)}}, "'env.A' is longer"),
    ({"argv": ["echo"], "env": {"LD_PRELOAD": "/tmp/x.so"}}, "LD_*"),
    ({"argv": ["echo"], "env": {"ld_library_path": "/tmp"}}, "LD_*"),
    ({"argv": ["echo"], "cwd": "srv"}, "'cwd' must be an absolute path"),
    ({"argv": ["echo"], "cwd": 5}, "'cwd' must be a string"),
    ({"argv": ["echo"], "cwd": "/" + "d" * MAX_ITEM_BYTES}, "'cwd' is longer"),
    ({"argv": ["echo"], "stdin": "x" * (MAX_STDIN_BYTES + 1)}, "'stdin' is longer than 65536"),
    ({"argv": ["echo"], "stdin": {"a": 1}}, "'stdin' must be a string"),
    ({"argv": ["echo"], "shell": True}, "unknown field 'shell'"),
])
def test_a_bad_field_is_named(payload: object, named: str) -> None:
    with pytest.raises(PayloadError) as error:
        parse(payload)
    assert named in str(error.value)
    assert error.value.error_type == "PayloadError"
    assert str(error.value).startswith("command: bad payload: ")


@pytest.mark.parametrize("payload", [b"not json", b"[1, 2]", b"\xff"])
def test_a_payload_that_is_no_json_object_is_refused(payload: bytes) -> None:
    with pytest.raises(PayloadError):
        parse_command_payload(payload)
