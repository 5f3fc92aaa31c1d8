"""The bearer token the command-line client sends: `CRONLOG_TOKEN`, or the contents of the
file `CRONLOG_TOKEN_FILE` names, for secrets handed to a process as files (a Kubernetes
secret volume, systemd credentials) rather than as environment variables."""

from __future__ import annotations

from collections.abc import Mapping

from cronlog.small_files import read_small_file

TOKEN_VARIABLE = "CRONLOG_TOKEN"
TOKEN_FILE_VARIABLE = "CRONLOG_TOKEN_FILE"
# Far above any token the api issues (docs/security.md); a larger file is the wrong file,
# and is not read whole.
MAX_TOKEN_BYTES = 4096


class TokenError(ValueError):
    """The token the environment names cannot be sent; the message never shows it."""


def caller_token(environ: Mapping[str, str]) -> str | None:
    """The token to send, or None when neither variable is set. A file's surrounding
    whitespace (its trailing newline) is not part of the token."""
    token = environ.get(TOKEN_VARIABLE)
    path = environ.get(TOKEN_FILE_VARIABLE)
    if path is None:
        return token or None
    if token:
        raise TokenError(f"{TOKEN_VARIABLE} and {TOKEN_FILE_VARIABLE} are both set: set one")
    if not path:
        raise TokenError(f"{TOKEN_FILE_VARIABLE} is set but empty: it must name a file")
    # Named as the server's own file settings name theirs (config_connections.py).
    source = f"{TOKEN_FILE_VARIABLE} {path}"
    raw = read_small_file(path, MAX_TOKEN_BYTES, source, TokenError,
                          f"holds more than {MAX_TOKEN_BYTES} bytes, which is not a token")
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise TokenError(f"{source}: holds bytes other than ASCII, which a token sent in a "
                         f"gRPC header cannot have") from None
    if not text:
        raise TokenError(f"{source}: holds no token")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise TokenError(f"{source}: holds more than one line or word; a token is "
                         f"printable characters without spaces")
    return text
