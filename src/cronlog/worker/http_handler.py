"""The built-in `http` handler: POSTs a job's body to its URL, fenced by an OutboundPolicy.

It sends through outbound/pinned_http.py: the URL's host resolved once, each address checked
by the policy and the connection made to that very address. Redirects are not followed: a
3xx fails the attempt with its Location, so a redirect cannot lead past the policy. The
response is read up to a bound within the attempt's timeout.
"""

from __future__ import annotations

import http.client
import json

from cronlog.outbound.pinned_http import Deadline, Unresolved, admitted, post
from cronlog.outbound.policy import (
    BadDestination,
    DestinationRefused,
    IPAddress,
    OutboundPolicy,
    Target,
    parse_target,
)
from cronlog.worker.handler_context import HandlerContext, HandlerFailed, PayloadError, json_payload

# The worker keeps 64 KiB of any output; one byte more tells it (and so the run) that the
# response was cut, without reading what would be thrown away.
MAX_RESPONSE_BYTES = 64 * 1024


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
        deadline = Deadline(ctx.timeout_seconds, "the attempt's timeout")
        try:
            addresses = self._admitted(target)
            return self._post(target, addresses, data, headers, deadline, ctx, url)
        except TimeoutError as exc:
            raise HandlerFailed(f"request to {url} failed: no complete response within the "
                                f"attempt's timeout ({ctx.timeout_seconds:g} s)",
                                "HttpError") from exc
        except (http.client.HTTPException, OSError) as exc:
            raise HandlerFailed(f"request to {url} failed: {exc}", "HttpError") from exc
        except ValueError as exc:  # http.client's word for a header it will not send
            raise PayloadError("http", str(exc)) from exc

    def _admitted(self, target: Target) -> list[IPAddress]:
        try:
            return admitted(self._policy, target)
        except Unresolved as exc:
            raise HandlerFailed(f"http: {exc}", "HttpError") from exc
        except DestinationRefused as exc:
            raise HandlerFailed(f"http: {exc}", "DestinationRefused") from None

    def _post(self, target: Target, addresses: list[IPAddress], data: bytes,
              headers: dict[str, str], deadline: Deadline, ctx: HandlerContext,
              url: str) -> bytes:
        def stop_when_cancelled() -> None:
            if ctx.cancelled.is_set():
                raise HandlerFailed("http: cancelled while reading the response", "Cancelled")

        answer = post(target, addresses, data, headers, deadline, MAX_RESPONSE_BYTES + 1,
                      after_chunk=stop_when_cancelled)
        status = answer.status
        if 300 <= status < 400:
            raise HandlerFailed(f"HTTP {status} from {url}: redirects are not followed "
                                f"(Location: {answer.location[:512]})", "HttpRedirect",
                                answer.body)
        if status >= 400:
            raise HandlerFailed(f"HTTP {status} from {url}", "HttpStatus", answer.body)
        return answer.body
