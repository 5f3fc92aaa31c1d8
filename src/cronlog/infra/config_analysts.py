"""Per-tenant analyst users from the environment: CRONLOG_ANALYSTS names them, their
passwords come from CRONLOG_ANALYST_PASSWORDS_FILE or a CRONLOG_ANALYST_PASSWORD_<user>
variable each. Errors name the variable, the file's line or the user, never a password."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

from cronlog.domain.spec import TENANT_PATTERN
from cronlog.infra.config import Analyst, ConfigError
from cronlog.infra.config_connections import read_named_file

ANALYSTS_VARIABLE = "CRONLOG_ANALYSTS"
PASSWORDS_FILE_VARIABLE = "CRONLOG_ANALYST_PASSWORDS_FILE"
PASSWORD_VARIABLE_PREFIX = "CRONLOG_ANALYST_PASSWORD_"
NETWORKS_VARIABLE = "CRONLOG_ANALYST_NETWORKS"
# A user name is an identifier on every ClickHouse (SQL and users.xml alike) and part of an
# environment variable's name, so nothing in it needs quoting anywhere.
USER_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# Analysts sign in from outside; a short password is guessed over the network.
MIN_PASSWORD_LENGTH = 16


def parse_analysts(text: str, source: str) -> list[tuple[str, str]]:
    """Comma-separated `tenant:user` entries, in order; a user listed twice is an error (one
    user seeing two tenants' rows is what analyst users exist to prevent)."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        where = f"{source} entry {number}"
        tenant, sep, user = (part.strip() for part in entry.partition(":"))
        if not sep:
            raise ConfigError(f"{where}: expected 'tenant:user', got {entry!r}")
        if not TENANT_PATTERN.fullmatch(tenant):
            raise ConfigError(f"{where}: tenant {tenant!r} must match {TENANT_PATTERN.pattern}")
        if not USER_PATTERN.fullmatch(user):
            raise ConfigError(f"{where}: user {user!r} must match {USER_PATTERN.pattern}")
        if user in seen:
            raise ConfigError(f"{where}: user {user!r} is listed twice")
        seen.add(user)
        pairs.append((tenant, user))
    return pairs


def _checked_password(password: str, user: str, where: str) -> str:
    if len(password) < MIN_PASSWORD_LENGTH or any(c.isspace() for c in password):
        raise ConfigError(f"{where}: the password of {user!r} must be at least "
                          f"{MIN_PASSWORD_LENGTH} characters, without whitespace")
    return password


def parse_passwords_file(text: str, source: str) -> dict[str, str]:
    """Lines of `user password`; blank lines and lines starting with '#' are skipped."""
    passwords: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{source} line {number}"
        fields = stripped.split()
        # Never the line itself in an error: it holds a password.
        if len(fields) != 2:
            raise ConfigError(f"{where}: expected 'user password', got {len(fields)} fields")
        user, password = fields
        if not USER_PATTERN.fullmatch(user):
            raise ConfigError(f"{where}: user {user!r} must match {USER_PATTERN.pattern}")
        if user in passwords:
            raise ConfigError(f"{where}: user {user!r} is listed twice")
        passwords[user] = _checked_password(password, user, where)
    return passwords


def analysts_from_env(env: Mapping[str, str]) -> tuple[Analyst, ...] | None:
    """None when CRONLOG_ANALYSTS is unset (provision leaves analyst users alone); set, even
    empty, it is the whole list, and provision removes the analysts it made that are gone."""
    if ANALYSTS_VARIABLE not in env:
        if env.get(PASSWORDS_FILE_VARIABLE):
            raise ConfigError(f"{PASSWORDS_FILE_VARIABLE} is set without {ANALYSTS_VARIABLE}")
        return None
    pairs = parse_analysts(env[ANALYSTS_VARIABLE], ANALYSTS_VARIABLE)
    named = read_named_file(env, PASSWORDS_FILE_VARIABLE)
    from_file = parse_passwords_file(*named) if named is not None else {}
    listed = {user for _, user in pairs}
    strays = sorted(set(from_file) - listed)
    if strays:
        raise ConfigError(f"{PASSWORDS_FILE_VARIABLE}: {', '.join(strays)} not listed in "
                          f"{ANALYSTS_VARIABLE}")
    analysts: list[Analyst] = []
    for tenant, user in pairs:
        variable = PASSWORD_VARIABLE_PREFIX + user
        in_variable = env.get(variable, "")
        if in_variable and user in from_file:
            raise ConfigError(f"the password of {user!r} is set twice: in {variable} and in "
                              f"{PASSWORDS_FILE_VARIABLE}")
        if in_variable:
            password = _checked_password(in_variable, user, variable)
        elif user in from_file:
            password = from_file[user]
        else:
            raise ConfigError(f"{ANALYSTS_VARIABLE}: user {user!r} has no password: set "
                              f"{variable} or add it to the file {PASSWORDS_FILE_VARIABLE} names")
        analysts.append(Analyst(tenant, user, password))
    return tuple(analysts)


def analyst_networks_from_env(env: Mapping[str, str],
                              default: tuple[str, ...]) -> tuple[str, ...]:
    """CRONLOG_ANALYST_NETWORKS: addresses or networks (CIDR), comma-separated, that the
    analysts may sign in from; unset, loopback only."""
    text = env.get(NETWORKS_VARIABLE, "")
    if not text.strip():
        return default
    networks = []
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        try:
            networks.append(str(ipaddress.ip_network(entry, strict=False)))
        except ValueError:
            raise ConfigError(f"{NETWORKS_VARIABLE} entry {number}: {entry!r} is not an IP "
                              "address or network (10.0.0.0/8, ::1)") from None
    return tuple(networks)
