"""The built-in `http` handler: POSTs a job's body to its URL, fenced by an OutboundPolicy.

The URL's host is resolved once; each resolved address is checked by the policy and the
connection goes to that very address (no second resolution a DNS answer could change
between check and use). The Host header and, for https, the TLS server name and certificate
check still use the host as the URL names it. Redirects are not followed: a 3xx fails the
attempt with its Location, so a redirect cannot lead past the policy. The response is read
up to a bound within the attempt's timeout.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
import time

from cronlog.worker.handler_context import HandlerContext, HandlerFailed, PayloadError, json_payload
from cronlog.worker.outbound import (
    BadDestination,
    DestinationRefused,
    IPAddress,
    OutboundPolicy,
    Target,
    parse_target,
)

# The worker keeps 64 KiB of any output; one byte more tells it (and so the run) that the
# response was cut, without reading what would be thrown away.
MAX_RESPONSE_BYTES = 64 * 1024
_READ_CHUNK = 16 * 1024


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self._at = time.monotonic() + seconds

    def left(self) -> float:
        remaining = self._at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the attempt's timeout passed")
        return remaining


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to a checked address while speaking to the URL's host name."""

    def __init__(self, target: Target, address: IPAddress, deadline: _Deadline) -> None:
        super().__init__(target.host, target.port, timeout=deadline.left())
        self._address = str(address)
        self._deadline = deadline

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self._deadline.left())


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    default_port = http.client.HTTPS_PORT  # so the Host header omits :443, as for https

    def __init__(self, target: Target, address: IPAddress, deadline: _Deadline) -> None:
        super().__init__(target, address, deadline)
        self._tls = ssl.create_default_context()

    def connect(self) -> None:
        super().connect()
        # The certificate must be valid for the name in the URL, not for the address.
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=self.host)


def _resolve(target: Target) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise HandlerFailed(f"http: cannot resolve {target.host}: {exc}", "HttpError") from exc
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def _admitted(policy: OutboundPolicy, target: Target) -> list[IPAddress]:
    """The resolved addresses the policy admits; none admitted fails with the first refusal."""
    admitted: list[IPAddress] = []
    refusal: DestinationRefused | None = None
    for address in _resolve(target):
        try:
            policy.check(target.host, address, target.port)
        except DestinationRefused as exc:
            refusal = refusal or exc
            continue
        admitted.append(address)
    if not admitted:
        if refusal is None:
            raise HandlerFailed(f"http: {target.host} resolved to no address", "HttpError")
        raise HandlerFailed(f"http: {refusal}", "DestinationRefused")
    return admitted


def _read_bounded(response: http.client.HTTPResponse, sock: socket.socket | None,
                  deadline: _Deadline, ctx: HandlerContext) -> bytes:
    body = bytearray()
    while len(body) <= MAX_RESPONSE_BYTES:
        left = deadline.left()
        if sock is not None:
            sock.settimeout(left)
        chunk = response.read1(min(_READ_CHUNK, MAX_RESPONSE_BYTES + 1 - len(body)))
        if not chunk:
            break
        body += chunk
        if ctx.cancelled.is_set():
            raise HandlerFailed("http: cancelled while reading the response", "Cancelled")
    return bytes(body)


class HttpHandler:
    """Callable as a Handler; payload JSON {"url", "body", "headers"}."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy = policy

    def __call__(self, ctx: HandlerContext) -> bytes:
        args = json_payload("http", ctx.payload)
        url = args.get("url")
        if not isinstance(url, str):
            raise PayloadError("http", "'url' must be an http(s) URL")
        try:
            target = parse_target(url)
        except BadDestination as exc:
            raise PayloadError("http", str(exc)) from None
        body = args.get("body", "")
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        headers = {"Idempotency-Key": ctx.idempotency_key, "X-Cronlog-Run-Id": str(ctx.run_id),
                   "X-Cronlog-Attempt": str(ctx.attempt), "Content-Type": "application/json"}
        extra = args.get("headers", {})
        if isinstance(extra, dict):
            headers.update({str(k): str(v) for k, v in extra.items()})
        deadline = _Deadline(ctx.timeout_seconds)
        try:
            addresses = _admitted(self._policy, target)
            return self._post(target, addresses, data, headers, deadline, ctx, url)
        except TimeoutError as exc:
            raise HandlerFailed(f"request to {url} failed: no complete response within the "
                                f"attempt's timeout ({ctx.timeout_seconds:g} s)",
                                "HttpError") from exc
        except (http.client.HTTPException, OSError) as exc:
            raise HandlerFailed(f"request to {url} failed: {exc}", "HttpError") from exc
        except ValueError as exc:  # http.client's word for a header it will not send
            raise PayloadError("http", str(exc)) from exc

    def _post(self, target: Target, addresses: list[IPAddress], data: bytes,
              headers: dict[str, str], deadline: _Deadline, ctx: HandlerContext,
              url: str) -> bytes:
        kind = _PinnedHTTPSConnection if target.scheme == "https" else _PinnedHTTPConnection
        last: OSError | None = None
        for address in addresses:
            connection = kind(target, address, deadline)
            try:
                try:
                    connection.connect()
                except OSError as exc:
                    last = exc  # the next admitted address may answer
                    continue
                # Kept: http.client drops its own reference once a response will close.
                sock = connection.sock
                connection.request("POST", target.path, body=data, headers=headers)
                if sock is not None:
                    sock.settimeout(deadline.left())
                response = connection.getresponse()
                output = _read_bounded(response, sock, deadline, ctx)
                status = response.status
                if 300 <= status < 400:
                    location = response.getheader("Location", "")
                    raise HandlerFailed(f"HTTP {status} from {url}: redirects are not followed "
                                        f"(Location: {location[:512]})", "HttpRedirect", output)
                if status >= 400:
                    raise HandlerFailed(f"HTTP {status} from {url}", "HttpStatus", output)
                return output
            finally:
                connection.close()
        raise OSError(f"no address of {target.host} answered: {last}")
