"""Where cronlog may send requests a tenant aimed: the outbound policy, pure and decided per
address.

A job's payload, or a tenant's alert channel, names any URL, so without a fence one
tenant's `http` job or webhook could reach the deployment's own Kafka, Postgres or
ClickHouse, other private hosts or a cloud metadata service. The policy decides on the
address a name resolved to (the caller connects to exactly that address: pinned_http.py),
so a name that resolves to a private address is refused like the address itself.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOW_VARIABLE = "CRONLOG_HTTP_ALLOW"
SCHEMES = {"http": 80, "https": 443}
# Well-known NAT64 prefix (RFC 6052): its addresses stand for the IPv4 address in their
# last 32 bits, so they are judged by that address.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class OutboundRefused(Exception):
    """A request may not go where it asks; the message says why and what to do."""


class BadDestination(OutboundRefused):
    """The URL itself cannot be used (scheme, host, port)."""


class DestinationRefused(OutboundRefused):
    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"destination {address} is not allowed: {reason}; "
                         f"operators can allow it with {ALLOW_VARIABLE}")
        self.address = address
        self.reason = reason


@dataclass(frozen=True)
class Target:
    """Where a URL points: scheme, host as written (lower case), port, and the request path."""

    scheme: str
    host: str
    port: int
    path: str


def parse_target(url: str) -> Target:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadDestination(f"'url' is not a usable URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise BadDestination(f"'url' must be an http or https URL, got scheme {scheme or 'none'!r}")
    host = (parts.hostname or "").lower()
    if not host:
        raise BadDestination("'url' has no host")
    if parts.username is not None or parts.password is not None:
        # Credentials in a URL end up in logs and run history; headers are the place.
        raise BadDestination("'url' must not carry credentials; send them in 'headers'")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(scheme, host, port if port is not None else SCHEMES[scheme], path)


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form stands for (mapped, 6to4, NAT64, Teredo client)."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.teredo is not None:
        return address.teredo[1]
    return None


def _class_of(address: IPAddress) -> str | None:
    """Why an address is not a public destination, or None when it is one."""
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_private:
        return "private"
    if address.is_reserved:
        return "reserved"
    if not address.is_global:
        # Shared address space (100.64.0.0/10) and the like: not on the public internet.
        return "not globally routable"
    return None


def refusal_class(address: IPAddress) -> str | None:
    """Why an address is refused by default, judging IPv6 forms of IPv4 by the IPv4 address."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        inner = _class_of(embedded)
        if inner is not None:
            return f"{inner} (as {address})"
    return _class_of(address)


def normalized(address: IPAddress) -> IPAddress:
    """IPv4-mapped IPv6 addresses as the IPv4 address they are."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _split_host_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):
        host, sep, rest = entry[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{entry!r}: expected [IPv6]:port")
        return host, _port(entry, rest[1:]) if rest else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, _port(entry, port)
    return entry, None


def _port(entry: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{entry!r}: port must be 1-65535")
    return int(text)


@dataclass(frozen=True)
class AllowList:
    """Operator exceptions: networks (CIDR or single address), host names, and either with a
    port. An entry without a port admits every port."""

    networks: tuple[tuple[IPNetwork, int | None], ...] = ()
    hosts: frozenset[tuple[str, int | None]] = frozenset()

    @classmethod
    def parse(cls, text: str) -> AllowList:
        """Comma-separated entries: `10.0.0.0/8`, `::1`, `hooks.internal`, `hooks.internal:8080`,
        `127.0.0.1:8080`, `[::1]:8080`. Raises ValueError naming the bad entry."""
        networks: list[tuple[IPNetwork, int | None]] = []
        hosts: set[tuple[str, int | None]] = set()
        for raw in text.split(","):
            entry = raw.strip()
            if not entry:
                continue
            if "/" in entry:
                try:
                    networks.append((ipaddress.ip_network(entry, strict=False), None))
                except ValueError as exc:
                    raise ValueError(f"{entry!r}: not a CIDR network ({exc})") from None
                continue
            host, port = _split_host_port(entry)
            try:
                address = ipaddress.ip_address(host)
            except ValueError:
                if not host or not all(part.replace("-", "").isalnum()
                                       for part in host.rstrip(".").split(".")):
                    raise ValueError(f"{entry!r}: not an address, network or host name") from None
                hosts.add((host.lower().rstrip("."), port))
                continue
            networks.append((ipaddress.ip_network(normalized(address)), port))
        return cls(tuple(networks), frozenset(hosts))

    def admits(self, host: str, address: IPAddress, port: int, exact: bool = False) -> bool:
        """Whether an entry admits this destination; exact: only entries naming its port."""
        name = host.rstrip(".")
        for candidate in ((name, port),) if exact else ((name, port), (name, None)):
            if candidate in self.hosts:
                return True
        for network, allowed_port in self.networks:
            if allowed_port is None and exact:
                continue
            if allowed_port in (None, port) and address.version == network.version \
                    and address in network:
                return True
        return False


@dataclass(frozen=True)
class OutboundPolicy:
    """Decides whether a request may connect to an address a URL's host resolved to.

    Refused unless the allow-list admits them: addresses that are not public (loopback,
    link-local such as cloud metadata, private, unique-local, unspecified, multicast,
    reserved; IPv6 forms of such IPv4 addresses too). The deployment's own servers
    (own_servers: host or address, port) are refused even when public, and a broad entry
    (a network, a host without port) does not open them: only an entry naming the server
    with its port does.
    """

    allow: AllowList = field(default_factory=AllowList)
    own_servers: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def of(cls, allow: str | Iterable[str] = "",
           own_servers: Iterable[tuple[str, int]] = ()) -> OutboundPolicy:
        text = allow if isinstance(allow, str) else ",".join(allow)
        own: set[tuple[str, int]] = set()
        for host, port in own_servers:
            try:
                own.add((str(normalized(ipaddress.ip_address(host.strip("[]")))), port))
            except ValueError:
                own.add((host.lower().rstrip("."), port))
        return cls(AllowList.parse(text), frozenset(own))

    def check(self, host: str, address: IPAddress, port: int) -> None:
        """Raises DestinationRefused unless host (as the URL names it), resolved to address,
        may be reached on port."""
        address = normalized(address)
        name = host.lower().rstrip(".")
        shown = f"{address}" if name == str(address) else f"{name} ({address})"
        if (name, port) in self.own_servers or (str(address), port) in self.own_servers:
            if self.allow.admits(name, address, port, exact=True):
                return
            raise DestinationRefused(f"{shown} port {port}",
                                     "one of this deployment's own servers")
        reason = refusal_class(address)
        if reason is None or self.allow.admits(name, address, port):
            return
        raise DestinationRefused(shown, reason)
