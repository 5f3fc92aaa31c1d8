"""The Host names the console answers to. A page on another site can make the browser talk
to the console through a name of its own that resolves to the console's address (DNS
rebinding): the request then carries that name as Host, and the browser treats the
console's answers as that site's, readable by its scripts. Answering only the names the
console is reached by (loopback names by default; CRONLOG_CONSOLE_HOSTS) defeats it; it
matters most in open mode, where no sign-in stands in the way."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
# A DNS name: labels of letters, digits and hyphens, not starting or ending with a hyphen.
_NAME = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))*")


def normal_host(name: str) -> str | None:
    """A host name or address as compared: lower case, without a trailing dot or IPv6
    brackets; None when it is neither a DNS name nor an IP address."""
    name = name.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    return name if len(name) <= 253 and _NAME.fullmatch(name) else None


def parse_hosts(text: str) -> tuple[str, ...]:
    """Comma-separated names (no ports, no schemes); ValueError naming the first bad one."""
    hosts: list[str] = []
    for entry in text.split(","):
        if not entry.strip():
            continue
        host = normal_host(entry)
        if host is None:
            raise ValueError(f"{entry.strip()!r} is not a host name or an IP address "
                             "(a name such as console.example.com, without a port)")
        if host not in hosts:
            hosts.append(host)
    if not hosts:
        raise ValueError("no host names given")
    return tuple(hosts)


def host_of(header: str) -> str | None:
    """The host of a Host header (`name`, `name:port`, `[v6]:port`), normalised."""
    header = header.strip()
    if header.startswith("["):
        end = header.find("]")
        rest = header[end + 1:]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return normal_host(header[:end + 1])
    name, _, port = header.partition(":")
    if port and not port.isdigit():
        return None
    return normal_host(name)


def host_allowed(header: str | None, allowed: Iterable[str]) -> bool:
    if not header:
        return False
    host = host_of(header)
    return host is not None and host in allowed


def is_loopback_only(hosts: Iterable[str]) -> bool:
    return all(h in LOOPBACK_HOSTS or h.endswith(".localhost") for h in hosts)
