"""Reading a small file a person named (a token file, a settings file): at most a bound of
bytes, so the wrong file (a log, a device) is refused rather than read whole, and errors
that name the file by how it was given, never by what it holds."""

from __future__ import annotations

from pathlib import Path


def read_small_file(path: str, most_bytes: int, source: str, error: type[Exception],
                    too_large: str) -> bytes:
    """The file's bytes. Raises error("<source>: cannot read: <reason>") when it cannot be
    read, error("<source>: <too_large>") when it holds more than most_bytes."""
    try:
        with Path(path).open("rb") as file:
            raw = file.read(most_bytes + 1)
    except OSError as exc:
        raise error(f"{source}: cannot read: "
                    f"{exc.strerror or type(exc).__name__}") from None
    if len(raw) > most_bytes:
        raise error(f"{source}: {too_large}")
    return raw
