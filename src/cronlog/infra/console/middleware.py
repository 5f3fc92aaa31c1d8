"""What every response of the console gets: the security headers, and the Host check
(DNS rebinding)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from cronlog.infra.console.hosts import host_allowed
from cronlog.infra.observability.log_rate import LogRate

log = logging.getLogger(__name__)

SECURITY_HEADERS = {
    # Scripts, styles and images only from the console itself: no inline script can run,
    # so escaped output that slipped into a script context still could not execute.
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; frame-ancestors 'none'; "
                               "form-action 'self'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    # Not no-referrer: with it Chromium sends `Origin: null` on the console's own forms,
    # which the origin check must refuse. Same-origin still leaks no URL to other sites.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
# Answered without a Host check: a load balancer's probe may name the console by address.
UNCHECKED_PATHS = frozenset({"/healthz"})


class SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        for key, value in SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        return response


class HostCheck(BaseHTTPMiddleware):
    """Only the allowed Host names (hosts.py: DNS rebinding); 421 for any other."""

    def __init__(self, app: Any, allowed_hosts: frozenset[str], refusal_log: LogRate) -> None:
        super().__init__(app)
        self._allowed_hosts = allowed_hosts
        self._refusal_log = refusal_log

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if (request.url.path not in UNCHECKED_PATHS
                and not host_allowed(request.headers.get("host"), self._allowed_hosts)):
            self._refusal_log.log(log, logging.WARNING,
                                  "refused a request for a host not in CRONLOG_CONSOLE_HOSTS "
                                  "from %s", request.client.host if request.client else "?")
            return PlainTextResponse("this console does not answer to that host name "
                                     "(CRONLOG_CONSOLE_HOSTS)", 421)
        return await call_next(request)
