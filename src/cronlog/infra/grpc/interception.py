"""What the server's interceptors share: the shape of grpc's intercept_service, and which
of a service's methods a call is, from its full name (`/cronlog.v1.JobService/GetJob`)."""

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
