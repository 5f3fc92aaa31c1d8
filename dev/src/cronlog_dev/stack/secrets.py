"""Passwords of the local stack's servers: made once per state folder and kept under it, so
a restarted stack (and every process pointed at it) keeps using the same ones."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

# Hex only: safe unquoted in a URL, an XML file and an SQL string literal.
_BYTES = 24


def stack_secret(state_dir: Path, name: str) -> str:
    """The password `name` of the stack in state_dir (state_dir/secrets/name, mode 0600)."""
    folder = state_dir / "secrets"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / name
    with contextlib.suppress(FileNotFoundError):
        existing = path.read_text(encoding="ascii").strip()
        if existing:
            return existing
    value = secrets.token_hex(_BYTES)
    # Written aside and renamed: a concurrent reader never sees a half-written password.
    partial = folder / f".{name}.{os.getpid()}"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(value + "\n")
    try:
        os.link(partial, path)  # fails if another starter got there first: theirs wins
    except FileExistsError:
        value = path.read_text(encoding="ascii").strip()
    finally:
        partial.unlink()
    return value


# The alert signing key (CRONLOG_ALERT_SIGNING_KEY_FILE): random bytes, as an operator
# would make it with `head -c 32 /dev/urandom`.
SIGNING_KEY_BYTES = 32


def stack_key_file(state_dir: Path, name: str = "alert-signing-key") -> Path:
    """The file of the stack's key `name` (state_dir/secrets/name, mode 0600, made once of
    SIGNING_KEY_BYTES random bytes): a restarted stack signs with the same key."""
    folder = state_dir / "secrets"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / name
    with contextlib.suppress(FileNotFoundError):
        if len(path.read_bytes()) >= SIGNING_KEY_BYTES:
            return path
    partial = folder / f".{name}.{os.getpid()}"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(SIGNING_KEY_BYTES))
    try:
        os.link(partial, path)  # fails if another starter got there first: theirs wins
    except FileExistsError:
        pass
    finally:
        partial.unlink()
    return path
