"""An HTTP POST to a URL a tenant named, through the outbound fence (policy.py). The worker's
`http` handler and the notifier's webhook and Slack senders send with it.

- The URL's host is resolved once; each resolved address is checked by the policy and the
  connection goes to that very address (no second resolution a DNS answer could change
  between check and use). The Host header and, for https, the TLS server name and the
  certificate check still use the host as the URL names it.
- Redirects are never followed: a 3xx is an answer like any other, its Location handed to
  the caller, so a redirect cannot lead past the policy.
- Bounded: connecting within one deadline, the answer (status, headers and body) within
  the same or a second one, and at most `max_body` bytes of the body read.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cronlog.outbound.policy import DestinationRefused, IPAddress, OutboundPolicy, Target

_READ_CHUNK = 16 * 1024


class Unresolved(OSError):
    """The URL's host cannot be resolved, or resolved to no address."""


class Deadline:
    """A moment on the monotonic clock; left() raises TimeoutError once it has passed."""

    def __init__(self, seconds: float, what: str = "the deadline") -> None:
        self._at = time.monotonic() + seconds
        self._what = what

    def left(self) -> float:
        remaining = self._at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"{self._what} passed")
        return remaining


class PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to a checked address while speaking to the URL's host name."""

    def __init__(self, target: Target, address: IPAddress, deadline: Deadline) -> None:
        super().__init__(target.host, target.port, timeout=deadline.left())
        self._address = str(address)
        self._deadline = deadline

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self._deadline.left())


class PinnedHTTPSConnection(PinnedHTTPConnection):
    default_port = http.client.HTTPS_PORT  # so the Host header omits :443, as for https

    def __init__(self, target: Target, address: IPAddress, deadline: Deadline) -> None:
        super().__init__(target, address, deadline)
        self._tls = ssl.create_default_context()

    def connect(self) -> None:
        super().connect()
        # The certificate must be valid for the name in the URL, not for the address.
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=self.host)


def resolve(target: Target) -> list[IPAddress]:
    """The addresses the target's host resolves to, each once, in the resolver's order."""
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Unresolved(f"cannot resolve {target.host}: {exc}") from exc
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def admitted(policy: OutboundPolicy, target: Target) -> list[IPAddress]:
    """The resolved addresses the policy admits. None admitted raises the first refusal
    (DestinationRefused), or Unresolved when the host resolved to nothing."""
    found: list[IPAddress] = []
    refusal: DestinationRefused | None = None
    for address in resolve(target):
        try:
            policy.check(target.host, address, target.port)
        except DestinationRefused as exc:
            refusal = refusal or exc
            continue
        found.append(address)
    if not found:
        if refusal is None:
            raise Unresolved(f"{target.host} resolved to no address")
        raise refusal
    return found


@dataclass(frozen=True)
class Answer:
    """What a server answered: its status, its Location header ("" when none; the caller
    decides what a 3xx means) and at most `max_body` bytes of its body."""

    status: int
    location: str
    body: bytes


def read_bounded(response: http.client.HTTPResponse, sock: socket.socket | None,
                 deadline: Deadline, max_body: int,
                 after_chunk: Callable[[], None] | None = None) -> bytes:
    """At most max_body bytes of the body, each read within what is left of the deadline;
    after_chunk runs after each chunk (and may raise to stop reading)."""
    body = bytearray()
    while len(body) < max_body:
        left = deadline.left()
        if sock is not None:
            sock.settimeout(left)
        chunk = response.read1(min(_READ_CHUNK, max_body - len(body)))
        if not chunk:
            break
        body += chunk
        if after_chunk is not None:
            after_chunk()
    return bytes(body)


def post(target: Target, addresses: list[IPAddress], data: bytes, headers: Mapping[str, str],
         deadline: Deadline, max_body: int, answer_within: float | None = None,
         after_chunk: Callable[[], None] | None = None) -> Answer:
    """POSTs data to the first of the (admitted) addresses that takes the connection.

    Connecting (TLS included) must finish within `deadline`; so must the answer, unless
    `answer_within` seconds, counted from the connection, are given for it. A timeout
    raises TimeoutError; no address answering, OSError; what http.client refuses to send
    (a header with a line break), ValueError."""
    kind = PinnedHTTPSConnection if target.scheme == "https" else PinnedHTTPConnection
    last: OSError | None = None
    for address in addresses:
        connection = kind(target, address, deadline)
        try:
            try:
                connection.connect()
            except OSError as exc:
                last = exc  # the next admitted address may answer
                continue
            answering = deadline if answer_within is None else Deadline(
                answer_within, "the time for the answer")
            # Kept: http.client drops its own reference once a response will close.
            sock = connection.sock
            if sock is not None:
                sock.settimeout(answering.left())
            connection.request("POST", target.path, body=data, headers=dict(headers))
            if sock is not None:
                sock.settimeout(answering.left())
            response = connection.getresponse()
            body = read_bounded(response, sock, answering, max_body, after_chunk)
            return Answer(response.status, response.getheader("Location", "") or "", body)
        finally:
            connection.close()
    raise OSError(f"no address of {target.host} answered: {last}")
