"""A read as a well-behaved client makes it: refused RESOURCE_EXHAUSTED by the tenant's read
budget (a read owes a read per 16 KiB of its answer: pages of large rows spend it fast), it
waits the `retry-after` the api gives and asks again, within a bound."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import grpc

T = TypeVar("T")


def retry_after(error: grpc.RpcError) -> float:
    for key, value in (error.trailing_metadata() or ()):  # type: ignore[attr-defined]
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
            if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:  # type: ignore[attr-defined]
                raise
            wait = retry_after(error)
            if time.monotonic() + wait > deadline:
                raise
            time.sleep(wait)
