"""The outbound policy: which addresses a handler may reach, and the operator's allow-list."""

from __future__ import annotations

import ipaddress

import pytest

from cronlog.outbound.policy import (
    AllowList,
    BadDestination,
    DestinationRefused,
    OutboundPolicy,
    parse_target,
)

PUBLIC_V4 = "93.184.215.14"
PUBLIC_V6 = "2606:2800:21f:cb07:6820:80da:af6b:8b2c"


def check(policy: OutboundPolicy, address: str, port: int = 443, host: str | None = None) -> None:
    policy.check(host or address, ipaddress.ip_address(address), port)


def refusal(policy: OutboundPolicy, address: str, port: int = 443,
            host: str | None = None) -> str:
    with pytest.raises(DestinationRefused) as caught:
        check(policy, address, port, host)
    return caught.value.reason


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("::1", "loopback"),
    ("169.254.169.254", "link-local"),  # cloud metadata
    ("fe80::1", "link-local"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.254", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"),
    ("240.0.0.1", "private"),  # reserved 240/4; Python counts it as private too
    ("100.64.0.1", "not globally routable"),  # carrier-grade NAT
    ("192.0.2.1", "private"),  # documentation
])
def test_non_public_addresses_are_refused_by_default(address: str, reason: str) -> None:
    assert refusal(OutboundPolicy(), address) == reason


@pytest.mark.parametrize(("address", "inner"), [
    ("::ffff:127.0.0.1", None),  # mapped: judged as the IPv4 address itself
    ("::ffff:169.254.169.254", None),
    ("::ffff:10.0.0.1", None),
    ("2002:7f00:1::", "loopback (as 2002:7f00:1::)"),  # 6to4 of 127.0.0.1
    ("64:ff9b::a9fe:a9fe", "link-local (as 64:ff9b::a9fe:a9fe)"),  # NAT64 of 169.254.169.254
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", None),  # Teredo whose client is 10.0.0.1
])
def test_ipv6_forms_of_refused_ipv4_addresses_are_refused(address: str, inner: str | None) -> None:
    reason = refusal(OutboundPolicy(), address)
    if inner is not None:
        assert reason == inner


def test_the_message_names_the_address_the_class_and_the_variable() -> None:
    with pytest.raises(DestinationRefused) as caught:
        check(OutboundPolicy(), "127.0.0.1", 80)
    assert str(caught.value) == ("destination 127.0.0.1 is not allowed: loopback; operators can "
                                 "allow it with CRONLOG_HTTP_ALLOW")
    with pytest.raises(DestinationRefused, match=r"destination localhost \(127\.0\.0\.1\)"):
        check(OutboundPolicy(), "127.0.0.1", 80, host="localhost")
    with pytest.raises(DestinationRefused, match=r"destination 127\.0\.0\.1 is not allowed"):
        check(OutboundPolicy(), "::ffff:127.0.0.1", 80, host="127.0.0.1")


def test_public_addresses_pass() -> None:
    check(OutboundPolicy(), PUBLIC_V4)
    check(OutboundPolicy(), PUBLIC_V6)
    check(OutboundPolicy(), f"::ffff:{PUBLIC_V4}")


def test_allow_list_cidr_admits_addresses_inside_only() -> None:
    policy = OutboundPolicy.of("10.0.0.0/8, fd00::/8")
    check(policy, "10.200.3.4")
    check(policy, "fd00::5")
    check(policy, "::ffff:10.1.1.1")
    assert refusal(policy, "192.168.0.1") == "private"
    assert refusal(policy, "127.0.0.1") == "loopback"


def test_allow_list_address_and_port_entries() -> None:
    policy = OutboundPolicy.of(["127.0.0.1:8080", "[::1]:9090", "169.254.169.254"])
    check(policy, "127.0.0.1", 8080)
    assert refusal(policy, "127.0.0.1", 8081) == "loopback"
    check(policy, "::1", 9090)
    assert refusal(policy, "::1", 80) == "loopback"
    check(policy, "169.254.169.254", 80)


def test_allow_list_host_entries_admit_by_the_name_in_the_url() -> None:
    policy = OutboundPolicy.of("hooks.internal, metrics.internal:8443")
    check(policy, "10.9.9.9", 443, host="hooks.internal")
    check(policy, "10.9.9.9", 443, host="HOOKS.internal.")
    check(policy, "10.9.9.9", 8443, host="metrics.internal")
    assert refusal(policy, "10.9.9.9", 443, host="metrics.internal") == "private"
    # The name admits, not the address: another name of it stays refused.
    assert refusal(policy, "10.9.9.9", 443, host="evil.example") == "private"


def test_own_servers_are_refused_even_when_public_and_a_broad_entry_does_not_open_them() -> None:
    own = [(PUBLIC_V4, 9092), ("pg.example.com", 5432)]
    policy = OutboundPolicy.of(f"{PUBLIC_V4}, 0.0.0.0/0, pg.example.com", own)
    assert refusal(policy, PUBLIC_V4, 9092) == "one of this deployment's own servers"
    assert refusal(policy, "8.8.8.8", 5432, host="pg.example.com") == \
        "one of this deployment's own servers"
    check(policy, PUBLIC_V4, 443)  # the same host on another port is not the server
    check(policy, "8.8.8.8", 443, host="pg.example.com")


def test_own_servers_open_only_to_an_entry_naming_them_with_their_port() -> None:
    own = [("127.0.0.1", 9000)]
    assert refusal(OutboundPolicy.of("127.0.0.1", own), "127.0.0.1", 9000) == \
        "one of this deployment's own servers"
    assert refusal(OutboundPolicy.of("127.0.0.0/8", own), "::ffff:127.0.0.1", 9000) == \
        "one of this deployment's own servers"
    check(OutboundPolicy.of("127.0.0.1:9000", own), "127.0.0.1", 9000)
    check(OutboundPolicy.of("127.0.0.1", own), "127.0.0.1", 8080)


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "host:0", "host:port", "a b", "[::1", "::1]:80",
                                   "10.0.0.1:99999", "bad_host!"])
def test_bad_allow_list_entries_are_errors_naming_the_entry(entry: str) -> None:
    with pytest.raises(ValueError, match="'"):
        AllowList.parse(entry)


def test_targets_only_http_and_https() -> None:
    target = parse_target("https://Hooks.Example.com/x?y=1")
    assert (target.scheme, target.host, target.port, target.path) == \
        ("https", "hooks.example.com", 443, "/x?y=1")
    assert parse_target("http://[::1]:8080").port == 8080
    assert parse_target("http://[::1]:8080").host == "::1"
    for url in ("ftp://example.com/", "file:///etc/passwd", "gopher://x", "//example.com",
                "http://", "http://user:pw@example.com/", "http://example.com:99999/"):
        with pytest.raises(BadDestination):
            parse_target(url)
