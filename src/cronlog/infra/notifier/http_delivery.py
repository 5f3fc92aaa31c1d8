"""One POST of an alert to a URL a tenant named, as a DeliveryResult: the webhook and Slack
senders' shared part.

Through the same egress fence as the worker's `http` handler (outbound/): the host resolved
once, each address checked by the policy, the connection pinned to an admitted address, no
redirect followed. Bounded: the connection (TLS included) within the timeout, then the
answer within the timeout again, and at most MAX_ANSWER_BYTES of its body read (an error
quotes its start). Errors name the host, never the URL: a Slack incoming-webhook URL is
itself a credential."""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from urllib.parse import urlsplit

from cronlog.notifications.model import DeliveryResult
from cronlog.notifications.outcomes import failed, http_result
from cronlog.outbound.pinned_http import Deadline, Unresolved, admitted, post
from cronlog.outbound.policy import BadDestination, DestinationRefused, OutboundPolicy, parse_target

MAX_ANSWER_BYTES = 4 * 1024
USER_AGENT = "cronlog-notifier"
TIMEOUT_SETTING = "CRONLOG_ALERT_HTTP_TIMEOUT_MS"


def redirect_host(location: str) -> str:
    """The host a Location header names; "" for a relative one (or one that cannot be read)."""
    try:
        return urlsplit(location.strip()).hostname or ""
    except ValueError:
        return ""


class HttpDelivery:
    """POSTs JSON bodies through the fence; safe to share between threads (it keeps no
    connection between requests)."""

    def __init__(self, policy: OutboundPolicy, timeout: timedelta = timedelta(seconds=5),
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if timeout <= timedelta(0):
            raise ValueError(f"alert HTTP timeout: more than 0, not {timeout}")
        self._policy = policy
        self._seconds = timeout.total_seconds()
        self._monotonic = monotonic

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> DeliveryResult:
        """POSTs body with the JSON content type, cronlog's User-Agent and the given headers."""
        started = self._monotonic()

        def elapsed_ms() -> int:
            return max(0, int((self._monotonic() - started) * 1000))

        try:
            target = parse_target(url)
        except BadDestination as exc:
            return failed(f"the channel's URL cannot be used: {exc}", elapsed_ms(), False)
        try:
            addresses = admitted(self._policy, target)
        except DestinationRefused as exc:
            return failed(str(exc), elapsed_ms(), False)
        except Unresolved as exc:  # a name that does not resolve now may resolve later
            return failed(str(exc), elapsed_ms(), True)
        sent = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers}
        try:
            answer = post(target, addresses, body, sent,
                          Deadline(self._seconds, "the time to connect"), MAX_ANSWER_BYTES,
                          answer_within=self._seconds)
        except TimeoutError:
            return failed(f"{target.host} did not connect and answer within {self._seconds:g} "
                          f"s each ({TIMEOUT_SETTING})", elapsed_ms(), True)
        except (http.client.HTTPException, OSError) as exc:  # TLS and broken answers too
            return failed(f"POST to {target.host} failed: {exc or type(exc).__name__}",
                          elapsed_ms(), True)
        except ValueError as exc:  # a header http.client will not send: ours, so a bug
            return failed(f"POST to {target.host} not sent: {exc}", elapsed_ms(), False)
        return http_result(answer.status, elapsed_ms(), answer.body,
                           redirect_host(answer.location))
