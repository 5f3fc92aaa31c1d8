"""Handlers a worker can run, looked up by the name a job gives in its spec."""

from __future__ import annotations

from collections.abc import Mapping

from cronlog.outbound.policy import OutboundPolicy
from cronlog.worker.built_in_handlers import BUILT_IN_HANDLERS
from cronlog.worker.command_handler import CommandHandler
from cronlog.worker.command_policy import CommandPolicy
from cronlog.worker.handler_context import Handler, UnknownHandler
from cronlog.worker.http_handler import HttpHandler


class HandlerRegistry:
    """Names to handlers; custom Python handlers register here next to the built-in ones."""

    def __init__(self, handlers: Mapping[str, Handler] | None = None,
                 outbound: OutboundPolicy | None = None,
                 commands: CommandPolicy | None = None) -> None:
        """outbound: where the built-in `http` handler may send requests (its default admits
        public addresses only). commands: what the built-in `command` handler may run (its
        default runs nothing)."""
        self._handlers: dict[str, Handler] = dict(BUILT_IN_HANDLERS if handlers is None
                                                  else handlers)
        if outbound is not None:
            self._handlers["http"] = HttpHandler(outbound)
        if commands is not None:
            self._handlers["command"] = CommandHandler(commands)

    def register(self, name: str, handler: Handler) -> None:
        if not name:
            raise ValueError("a handler needs a name")
        self._handlers[name] = handler

    def get(self, name: str) -> Handler:
        try:
            return self._handlers[name]
        except KeyError:
            raise UnknownHandler(f"no handler named {name!r} on this worker") from None

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def names(self) -> list[str]:
        return sorted(self._handlers)
