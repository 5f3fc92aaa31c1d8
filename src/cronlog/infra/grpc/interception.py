"""What the server's interceptors share: the shape of grpc's intercept_service, which of a
service's methods a call is, from its full name (`/cronlog.v1.JobService/GetJob`), and an
interceptor of some of one service's methods."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, TypeAlias

import grpc

# Strings: grpc's classes are generic to the type checker only.
MethodHandler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
# What an interceptor calls for the handler of a call: None when the server has none.
Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], MethodHandler | None]"


class ServiceMethods:
    def __init__(self, service: str, methods: Collection[str]) -> None:
        """service: the full name (cronlog.v1.JobService); methods: those of its method
        names an interceptor looks after."""
        self._prefix = f"/{service}/"
        self._methods = frozenset(methods)

    def of(self, full_method: str) -> str | None:
        """The call's method name, or None for another service's or another method."""
        if not full_method.startswith(self._prefix):
            return None
        method = full_method[len(self._prefix):]
        return method if method in self._methods else None


class ServiceMethodInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """Intercepts some of one service's methods; the other calls' handlers pass unchanged."""

    def __init__(self, service: str, methods: Collection[str]) -> None:
        self._methods = ServiceMethods(service, methods)

    def intercept_service(self, continuation: Continuation,
                          handler_call_details: grpc.HandlerCallDetails) -> MethodHandler | None:
        handler = continuation(handler_call_details)
        method = self._methods.of(handler_call_details.method)
        if handler is None or method is None:
            return handler
        return self.intercepted(handler, method)

    def intercepted(self, handler: MethodHandler, method: str) -> MethodHandler:
        """The handler of a call to `method`, one of those intercepted."""
        raise NotImplementedError
