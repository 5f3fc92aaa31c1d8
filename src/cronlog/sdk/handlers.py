"""Marking a function as a handler, and the failure that is not retried."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

# Installed packages name their handlers (a decorated function, or a module of them) here.
ENTRY_POINT_GROUP = "cronlog.handlers"
# What a job's spec.handler may be (domain/spec.py HANDLER_PATTERN says the same).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_MARK = "__cronlog_handler__"

F = TypeVar("F", bound=Callable[..., Any])


class NonRetryable(Exception):
    """Raised by a handler: the attempt fails and the run gets no more attempts, whatever
    its retry policy (its error type is `NonRetryable`)."""


def handler(name: str) -> Callable[[F], F]:
    """Marks a function (`def` or `async def`, taking a Context) as the handler `name`; the
    function itself is unchanged, so it can be called in tests as it is."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"handler name {name!r} must match {NAME_PATTERN.pattern}")

    def mark(function: F) -> F:
        if not callable(function):
            raise TypeError(f"@handler({name!r}) must decorate a function")
        setattr(function, _MARK, name)
        return function

    return mark


def handler_name(thing: object) -> str | None:
    """The name @handler gave `thing`, or None when it is not a handler."""
    name = getattr(thing, _MARK, None)
    return name if isinstance(name, str) else None
