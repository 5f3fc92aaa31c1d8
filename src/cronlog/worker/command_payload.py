"""The `command` handler's payload, checked and bounded before anything starts.

Payload JSON: {"argv": [...], "env": {...}, "cwd": "...", "stdin": "..."}; only argv is
required. Each bound is in UTF-8 bytes; a bad field fails the attempt with a PayloadError
naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cronlog.worker.handler_context import PayloadError, json_payload

MAX_ARGV_ITEMS = 256
MAX_ITEM_BYTES = 4 * 1024  # an argv item, an env value, the cwd
MAX_ENV_ENTRIES = 64
MAX_STDIN_BYTES = 64 * 1024
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The dynamic loader's variables load code into whichever program is allowed: a tenant
# naming a library of its own would run anything under an allowed program's name.
_LOADER_PREFIXES = ("LD_",)
_FIELDS = frozenset({"argv", "env", "cwd", "stdin"})


@dataclass(frozen=True)
class CommandRequest:
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: str | None
    stdin: bytes


def _text(value: object, field: str, limit: int) -> str:
    if not isinstance(value, str):
        raise PayloadError("command", f"'{field}' must be a string")
    try:
        size = len(value.encode())
    except UnicodeEncodeError:  # a lone surrogate, which JSON can spell and no OS takes
        raise PayloadError("command", f"'{field}' must be valid Unicode text") from None
    if size > limit:
        raise PayloadError("command", f"'{field}' is longer than {limit} bytes")
    if "\0" in value:
        raise PayloadError("command", f"'{field}' must not contain NUL characters")
    return value


def _argv(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_ARGV_ITEMS:
        raise PayloadError("command", f"'argv' must be a list of 1 to {MAX_ARGV_ITEMS} strings")
    argv = tuple(_text(item, f"argv[{i}]", MAX_ITEM_BYTES) for i, item in enumerate(value))
    program = argv[0]
    if not program or ("/" in program and not program.startswith("/")):
        raise PayloadError("command", "'argv[0]' must be an absolute path or a bare name "
                                      "looked up in the worker's PATH")
    return argv


def _env(value: object) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > MAX_ENV_ENTRIES:
        raise PayloadError("command", f"'env' must be an object of at most {MAX_ENV_ENTRIES} "
                                      "string values")
    env: dict[str, str] = {}
    for name, item in value.items():
        if not ENV_NAME.fullmatch(name) or len(name) > MAX_ITEM_BYTES:
            raise PayloadError("command", f"'env' name {name[:64]!r} must match "
                                          f"{ENV_NAME.pattern}")
        if name.upper().startswith(_LOADER_PREFIXES):
            raise PayloadError("command", f"'env' name {name[:64]!r}: the dynamic loader's "
                                          "variables (LD_*) are not passed")
        env[name] = _text(item, f"env.{name}", MAX_ITEM_BYTES)
    return env


def parse_command_payload(payload: bytes) -> CommandRequest:
    """At most 256 argv items and 64 env entries checked, each at most 4 KiB."""
    args = json_payload("command", payload)
    unknown = sorted(set(args) - _FIELDS)
    if unknown:
        raise PayloadError("command", f"unknown field {unknown[0][:64]!r} (expected "
                                      f"{', '.join(sorted(_FIELDS))})")
    if "argv" not in args:
        raise PayloadError("command", "'argv' is required: the program and its arguments")
    cwd = args.get("cwd")
    if cwd is not None and not _text(cwd, "cwd", MAX_ITEM_BYTES).startswith("/"):
        raise PayloadError("command", "'cwd' must be an absolute path")
    stdin = _text(args.get("stdin", ""), "stdin", MAX_STDIN_BYTES)
    return CommandRequest(argv=_argv(args["argv"]), env=_env(args.get("env", {})),
                          cwd=cwd if isinstance(cwd, str) else None,
                          stdin=stdin.encode())
