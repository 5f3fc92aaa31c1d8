"""An env file for the `cronlog` command: KEY=VALUE lines of CRONLOG_* settings, such as the
one `make run` writes to `.cronlog/run/cronlog.env`, named by `--env-file` or
CRONLOG_ENV_FILE.

Its values fill in what the environment does not set: a variable set in the environment
(even empty) wins, as `docker run -e` wins over `--env-file`, so one setting can be
changed for one command without editing a file that holds passwords. Errors name the file
and the line, never a value.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, MutableMapping, Sequence

from cronlog.infra.config import ConfigError
from cronlog.small_files import read_small_file

ENV_FILE_VARIABLE = "CRONLOG_ENV_FILE"
OPTION = "--env-file"
# Far above any settings file (make run's is under 2 KiB); a larger file is the wrong one
# and is not read whole.
MAX_ENV_FILE_BYTES = 1 << 20
_NAME = re.compile(r"CRONLOG_[A-Z0-9_]+")


class EnvFileError(ConfigError):
    """The env file cannot be read or holds a line that is not a setting."""


def parse_env_file(text: str, source: str) -> dict[str, str]:
    """`CRONLOG_NAME=value` lines; blank lines and lines starting with '#' are skipped. The
    value is everything after the first '=', as it is: no quotes, no escapes, no
    variables, so a password may hold any character but a line break."""
    values: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{source} line {number}"
        name, sep, value = line.partition("=")
        # Never the line itself in an error: it may be a password's line.
        if not sep:
            raise EnvFileError(f"{where}: expected CRONLOG_NAME=value")
        if not _NAME.fullmatch(name):
            raise EnvFileError(f"{where}: the name before '=' must be a CRONLOG_* variable "
                               "(capital letters, digits, '_'; no spaces, no 'export')")
        if name == ENV_FILE_VARIABLE:
            raise EnvFileError(f"{where}: {ENV_FILE_VARIABLE} cannot name another env file")
        if name in values:
            raise EnvFileError(f"{where}: {name} is set twice (first on line "
                               f"{first_line[name]})")
        values[name] = value
        first_line[name] = number
    return values


def read_env_file(path: str, source: str) -> dict[str, str]:
    raw = read_small_file(path, MAX_ENV_FILE_BYTES, source, EnvFileError,
                          f"larger than {MAX_ENV_FILE_BYTES} bytes, which is not a settings "
                          "file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise EnvFileError(f"{source} line {line}: not UTF-8 text") from None
    return parse_env_file(text, source)


def env_file_named(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The env file's path and how errors name it: the option, else the variable (empty
    counts as unset), else None. Read before the command line is parsed in full, because
    parsing reads defaults (the client's --address) from the environment."""
    early = argparse.ArgumentParser(add_help=False, prog="cronlog")
    early.add_argument(OPTION, dest="env_file")
    known, _ = early.parse_known_args(list(argv))
    if known.env_file:
        return known.env_file, f"{OPTION} {known.env_file}"
    path = environ.get(ENV_FILE_VARIABLE, "")
    return (path, f"{ENV_FILE_VARIABLE} {path}") if path else None


def fill_from_env_file(argv: Sequence[str], environ: MutableMapping[str, str]) -> list[str]:
    """Sets the env file's variables that environ lacks; returns their names. Raises
    EnvFileError naming the file (and line) when it cannot be used."""
    named = env_file_named(argv, environ)
    if named is None:
        return []
    filled = []
    for name, value in read_env_file(*named).items():
        if name not in environ:
            environ[name] = value
            filled.append(name)
    return filled
