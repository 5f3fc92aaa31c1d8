"""Per-tenant bearer-token authentication of the gRPC api.

TenantAuthInterceptor runs before any servicer code: a call without a known
`authorization: Bearer <token>` is answered UNAUTHENTICATED, and an accepted call runs
with its tenant in a context variable that the servicer reads with caller_tenant().
Health checks and server reflection stay public, so probes and `grpcurl list` work.
"""

from __future__ import annotations

import contextvars
import hmac
import ipaddress
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from cronlog.infra.config import ConfigError
from cronlog.infra.grpc.interception import Continuation, MethodHandler
from cronlog.infra.observability.log_rate import LogRate

log = logging.getLogger(__name__)
# Anyone who reaches the api can be refused at will: a line for some, a count for the rest.
REFUSAL_LOG = LogRate()

PUBLIC_SERVICES = frozenset({
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
})

OPEN_MODE_WARNING = (
    "NO TENANT TOKENS CONFIGURED: the gRPC api runs OPEN, without authentication; any "
    "client can read and change every tenant's jobs. Set CRONLOG_TENANT_TOKENS_FILE or "
    "CRONLOG_TENANT_TOKENS (see docs/security.md) anywhere but on a developer machine."
)


class OpenBindRefused(ConfigError):
    """Open mode (no tenant tokens) was asked to listen beyond this machine."""


def is_loopback_bind(address: str) -> bool:
    """Whether a gRPC listen address (`host:port`, `[v6]:port`, `unix:path`) reaches only
    this machine. Anything but a literal loopback address, `localhost` or a Unix socket
    counts as reachable from elsewhere: a host name may resolve to any interface."""
    if address.startswith(("unix:", "unix-abstract:")):
        return True
    host = address.rsplit(":", 1)[0] if ":" in address else address
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_open_bind(address: str, has_tokens: bool, open_flag: bool) -> None:
    """Without tokens any client is every tenant, so the api stays on loopback unless the
    operator said, with CRONLOG_API_OPEN=1, that an open api beyond this machine is meant."""
    if has_tokens or open_flag or is_loopback_bind(address):
        return
    raise OpenBindRefused(
        f"CRONLOG_GRPC_ADDRESS {address} is not a loopback address and no tenant tokens are "
        "configured: anyone who reaches it could read and change every tenant's jobs. Set "
        "CRONLOG_TENANT_TOKENS_FILE or CRONLOG_TENANT_TOKENS (docs/security.md), bind "
        "127.0.0.1, or set CRONLOG_API_OPEN=1 if an open api is really meant.")


_caller: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "cronlog_caller_tenant", default=None)


def caller_tenant() -> str | None:
    """The tenant the current call authenticated as; None outside an authenticated call."""
    return _caller.get()


class TokenTable:
    """Bearer token to tenant, compared in constant time."""

    def __init__(self, tenant_tokens: Iterable[tuple[str, str]]) -> None:
        self._entries = tuple((token.encode(), tenant) for tenant, token in tenant_tokens)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def tenant_for(self, token: str) -> str | None:
        presented = token.encode()
        found: str | None = None
        for known, tenant in self._entries:
            # Every entry is compared, so the time taken tells nothing about which one,
            # or how much of one, matched.
            if hmac.compare_digest(presented, known) and found is None:
                found = tenant
        return found


@dataclass(frozen=True)
class Decision:
    """What the interceptor does with a call: let it through as `tenant` (None for public
    services), or reject it with `reason`."""

    tenant: str | None = None
    reason: str = ""

    @property
    def rejected(self) -> bool:
        return bool(self.reason)


def service_of(method: str) -> str:
    """`/pkg.Service/Method` -> `pkg.Service`."""
    return method.lstrip("/").split("/", 1)[0]


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the one `authorization: Bearer ...` entry; None if missing or ambiguous."""
    values = [v for k, v in metadata or () if k.lower() == "authorization"]
    if len(values) != 1 or not isinstance(values[0], str):
        return None
    scheme, _, token = values[0].strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def decide(method: str, metadata: Iterable[tuple[str, str | bytes]] | None,
           tokens: TokenTable) -> Decision:
    if service_of(method) in PUBLIC_SERVICES:
        return Decision()
    token = bearer_token(metadata)
    if token is None:
        return Decision(reason="missing bearer token: send metadata 'authorization: Bearer <token>'")
    tenant = tokens.tenant_for(token)
    if tenant is None:
        return Decision(reason="unknown bearer token")
    return Decision(tenant=tenant)


Behavior = Callable[[Any, grpc.ServicerContext], Any]


def _rejecting(reason: str, streaming_response: bool) -> Behavior:
    def reject(_request: Any, context: grpc.ServicerContext) -> Any:
        REFUSAL_LOG.log(log, logging.INFO, "rejected a call from %s: %s", context.peer(), reason)
        context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)

    def reject_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        reject(request, context)
        yield from ()

    return reject_stream if streaming_response else reject


def _as_tenant(behavior: Behavior, tenant: str, streaming_response: bool) -> Behavior:
    # The variable is set around the servicer's own call, on the thread that runs it;
    # intercept_service itself runs on the server's polling thread.
    def call(request: Any, context: grpc.ServicerContext) -> Any:
        reset = _caller.set(tenant)
        try:
            return behavior(request, context)
        finally:
            _caller.reset(reset)

    def call_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        reset = _caller.set(tenant)
        try:
            yield from behavior(request, context)
        finally:
            _caller.reset(reset)

    return call_stream if streaming_response else call


_FACTORIES = {
    (False, False): ("unary_unary", grpc.unary_unary_rpc_method_handler),
    (False, True): ("unary_stream", grpc.unary_stream_rpc_method_handler),
    (True, False): ("stream_unary", grpc.stream_unary_rpc_method_handler),
    (True, True): ("stream_stream", grpc.stream_stream_rpc_method_handler),
}


def _replace_behavior(handler: grpc.RpcMethodHandler[Any, Any],
                      make: Callable[[Behavior, bool], Behavior]) -> grpc.RpcMethodHandler[Any, Any]:
    attribute, factory = _FACTORIES[(bool(handler.request_streaming),
                                     bool(handler.response_streaming))]
    behavior: Behavior = getattr(handler, attribute)
    return factory(make(behavior, bool(handler.response_streaming)),
                   request_deserializer=handler.request_deserializer,
                   response_serializer=handler.response_serializer)


class TenantAuthInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self, tokens: TokenTable) -> None:
        if not tokens:
            raise ValueError("TenantAuthInterceptor needs at least one token")
        self._tokens = tokens

    def intercept_service(self, continuation: Continuation,
                          handler_call_details: grpc.HandlerCallDetails) -> MethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        decision = decide(handler_call_details.method, handler_call_details.invocation_metadata,
                          self._tokens)
        if decision.rejected:
            reason = decision.reason
            return _replace_behavior(handler, lambda _b, streaming: _rejecting(reason, streaming))
        if decision.tenant is None:
            return handler
        tenant = decision.tenant
        return _replace_behavior(handler, lambda b, streaming: _as_tenant(b, tenant, streaming))

