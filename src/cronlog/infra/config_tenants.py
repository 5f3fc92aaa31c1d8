"""What each tenant may use, from the CRONLOG_* variables: its api token, the queues and
handlers it may name (and those every tenant may), its limits on jobs and runs in flight."""

from __future__ import annotations

import re
from collections.abc import Mapping

from cronlog.domain.limits import TenantLimit, TenantLimits
from cronlog.domain.spec import QUEUE_PATTERN, TENANT_PATTERN
from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_connections import read_named_file
from cronlog.infra.config_values import ENV, positive


def _token_pair(tenant: str, token: str, where: str) -> tuple[str, str]:
    # Error messages name where the pair came from but never echo the token. A tenant no
    # job could belong to stops the api at start instead of locking that tenant out later.
    if not TENANT_PATTERN.fullmatch(tenant):
        raise ConfigError(f"{where}: tenant {tenant!r} must match {TENANT_PATTERN.pattern}")
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"{where}: the token of tenant {tenant!r} must be non-empty, "
                          "without whitespace")
    return tenant, token


def parse_tenant_tokens_file(text: str, source: str) -> list[tuple[str, str]]:
    """Lines of `tenant token`; blank lines and lines starting with '#' are skipped. A '#'
    later in a line is part of the token, so tokens may contain any non-blank character."""
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = stripped.split()
        if len(fields) != 2:
            raise ConfigError(f"{source} line {number}: expected 'tenant token', "
                              f"got {len(fields)} fields")
        pairs.append(_token_pair(fields[0], fields[1], f"{source} line {number}"))
    return pairs


def parse_tenant_tokens_list(text: str, source: str) -> list[tuple[str, str]]:
    """Comma-separated `tenant=token` entries; the token is everything after the first '='."""
    pairs: list[tuple[str, str]] = []
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        tenant, sep, token = entry.partition("=")
        if not sep:
            raise ConfigError(f"{source} entry {number}: expected 'tenant=token'")
        pairs.append(_token_pair(tenant.strip(), token.strip(), f"{source} entry {number}"))
    return pairs


def tenant_tokens_from_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    named = read_named_file(env, ENV + "TENANT_TOKENS_FILE")
    if named is not None:
        pairs += parse_tenant_tokens_file(*named)
    pairs += parse_tenant_tokens_list(env.get(ENV + "TENANT_TOKENS", ""), ENV + "TENANT_TOKENS")
    owners: dict[str, str] = {}
    for tenant, token in pairs:
        # One token naming two tenants would make the caller's tenant depend on list order.
        if owners.setdefault(token, tenant) != tenant:
            raise ConfigError(f"tenants {owners[token]!r} and {tenant!r} have the same token")
    return tuple(dict.fromkeys(pairs))


def parse_names(text: str, source: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    """Comma-separated names, each matching pattern, in order, without repeats."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if not pattern.fullmatch(name):
            raise ConfigError(f"{source}: {name!r} must match {pattern.pattern}")
    return tuple(dict.fromkeys(names))


def parse_tenant_allow_list(text: str, source: str,
                            pattern: re.Pattern[str]) -> dict[str, tuple[str, ...]]:
    """Comma-separated `tenant:name|name...` entries (`acme:default|batch,beta:default`)."""
    allowed: dict[str, tuple[str, ...]] = {}
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        tenant, sep, names = entry.partition(":")
        tenant = tenant.strip()
        where = f"{source} entry {number}"
        if not sep or not TENANT_PATTERN.fullmatch(tenant):
            raise ConfigError(f"{where}: expected 'tenant:name|name...', got {entry!r}")
        if tenant in allowed:
            raise ConfigError(f"{where}: tenant {tenant!r} is listed twice")
        listed = [n.strip() for n in names.split("|") if n.strip()]
        if not listed:
            raise ConfigError(f"{where}: tenant {tenant!r} lists nothing")
        for name in listed:
            if not pattern.fullmatch(name):
                raise ConfigError(f"{where}: {name!r} must match {pattern.pattern}")
        allowed[tenant] = tuple(dict.fromkeys(listed))
    return allowed


def queues_from_env(env: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...],
                                                     dict[str, tuple[str, ...]]]:
    """Declared queues, the ones this worker serves, and the tenants' queue allow-lists."""
    declared = parse_names(env.get(ENV + "QUEUES", ""), ENV + "QUEUES", QUEUE_PATTERN) \
        or Settings.queues
    served = parse_names(env.get(ENV + "WORKER_QUEUES", ""), ENV + "WORKER_QUEUES",
                         QUEUE_PATTERN)
    undeclared = [q for q in served if q not in declared]
    if undeclared:
        raise ConfigError(f"{ENV}WORKER_QUEUES: {', '.join(undeclared)} not declared in "
                          f"{ENV}QUEUES ({', '.join(declared)})")
    per_tenant = parse_tenant_allow_list(env.get(ENV + "TENANT_QUEUES", ""),
                                         ENV + "TENANT_QUEUES", QUEUE_PATTERN)
    for tenant, queues in per_tenant.items():
        undeclared = [q for q in queues if q not in declared]
        if undeclared:
            raise ConfigError(f"{ENV}TENANT_QUEUES: tenant {tenant!r} lists "
                              f"{', '.join(undeclared)}, not declared in {ENV}QUEUES")
    return declared, served, per_tenant


NONE_SHARED = "-"


def shared_from_env(env: Mapping[str, str], name: str, pattern: re.Pattern[str],
                    default: tuple[str, ...]) -> tuple[str, ...]:
    """Comma-separated names every tenant without an allow-list may use when tokens are on;
    unset: the default; `-`: none."""
    raw = env.get(ENV + name, "").strip()
    if raw == "":
        return default
    if raw == NONE_SHARED:
        return ()
    return parse_names(raw, ENV + name, pattern)


def shared_queues_from_env(env: Mapping[str, str], declared: tuple[str, ...]) -> tuple[str, ...]:
    if not env.get(ENV + "SHARED_QUEUES", "").strip():
        # The default queue, when the operator declared one by that name.
        return tuple(q for q in Settings.shared_queues if q in declared)
    shared = shared_from_env(env, "SHARED_QUEUES", QUEUE_PATTERN, ())
    undeclared = [q for q in shared if q not in declared]
    if undeclared:
        raise ConfigError(f"{ENV}SHARED_QUEUES: {', '.join(undeclared)} not declared in "
                          f"{ENV}QUEUES ({', '.join(declared)})")
    return shared


def parse_tenant_limits(text: str, source: str) -> dict[str, TenantLimit]:
    """Comma-separated `tenant:max_jobs:max_in_flight` entries."""
    limits: dict[str, TenantLimit] = {}
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        fields = entry.split(":")
        if len(fields) != 3 or not TENANT_PATTERN.fullmatch(fields[0]):
            raise ConfigError(f"{source} entry {number}: expected 'tenant:max_jobs:max_in_flight'"
                              f", got {entry!r}")
        try:
            jobs, in_flight = int(fields[1]), int(fields[2])
        except ValueError:
            raise ConfigError(f"{source} entry {number}: limits must be integers, "
                              f"got {entry!r}") from None
        if jobs <= 0 or in_flight <= 0:
            raise ConfigError(f"{source} entry {number}: limits must be positive, got {entry!r}")
        limits[fields[0]] = TenantLimit(jobs, in_flight)
    return limits


def tenant_limits_from_env(env: Mapping[str, str]) -> TenantLimits:
    d = TenantLimit()
    default = TenantLimit(positive(env, "TENANT_MAX_JOBS", d.max_jobs),
                          positive(env, "TENANT_MAX_IN_FLIGHT", d.max_in_flight))
    return TenantLimits(default, parse_tenant_limits(env.get(ENV + "TENANT_LIMITS", ""),
                                                     ENV + "TENANT_LIMITS"))
