"""Calls as a well-behaved client makes them. A read refused RESOURCE_EXHAUSTED by the
tenant's read budget (a read owes a read per 16 KiB of its answer: pages of large rows spend
it fast) waits the `retry-after` the api gives and asks again; a command answered
UNAVAILABLE is sent again as it was. Both within a bound."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar, cast

import grpc

T = TypeVar("T")


def retry_after(error: grpc.RpcError) -> float:
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailing = cast("Iterable[tuple[str, str | bytes]]", error.trailing_metadata() or ())
    for key, value in trailing:
        if key == "retry-after":
            return float(value)
    return 1.0


def served(call: Callable[[], T], within: float = 120.0) -> T:
    """The call's answer; refusals by the budget are waited out, anything else raises."""
    deadline = time.monotonic() + within
    while True:
        try:
            return call()
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            wait = retry_after(error)
            if time.monotonic() + wait > deadline:
                raise
            time.sleep(wait)


def applied(call: Callable[[], T], within: float = 60.0) -> T:
    """A command's answer as a well-behaved client gets it: the same request (same request
    id) sent again while the api says UNAVAILABLE, e.g. applied but not yet visible on a
    starved machine; within a bound."""
    deadline = time.monotonic() + within
    while True:
        try:
            return call()
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            if time.monotonic() + 1.0 > deadline:
                raise
            time.sleep(1.0)
