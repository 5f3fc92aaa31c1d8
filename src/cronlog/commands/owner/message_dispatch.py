"""Each inbox message to its handler, by name: a message no handler takes, or one with a
request id no api would send, is answered (or logged) here and never reaches a handler."""

from __future__ import annotations

import logging
from datetime import datetime

from cronlog.commands.owner import owner_messages as messages
from cronlog.commands.owner.owner_cycle import Cycle, Handler
from cronlog.commands.owner.ports import Outgoing, Topics
from cronlog.commands.owner.set_aside import correlation_of
from cronlog.domain.ids import MAX_REQUEST_ID_CHARS, valid_request_id
from cronlog.log_fields import record_fields
from cronlog.ports import InboundMessage

# The owner's log lines keep one logger name, whichever part of it writes them.
log = logging.getLogger("cronlog.commands.owner.partition_owner")


class MessageDispatch:
    def __init__(self, topics: Topics, handler_of: dict[str, Handler]) -> None:
        """handler_of: the handler of each message name (the collaborators' tables)."""
        self._topics = topics
        self.handler_of = handler_of

    def handle(self, message: InboundMessage, now: datetime, cycle: Cycle) -> None:
        handler = self.handler_of.get(message.name)
        if handler is None:
            request_id = message.record.get("request_id")
            if request_id:
                cycle.replies.append(self._replying(str(request_id), ok=False,
                                                    code="UNIMPLEMENTED",
                                                    message=f"{message.name} is not supported yet"))
            else:
                log.warning("ignoring inbox message %s at %d@%d", message.name,
                            message.partition, message.offset,
                            extra=record_fields(message.record))
            return
        request_id = message.record.get("request_id")
        if request_id is not None and not valid_request_id(request_id):
            # Only a writer that bypasses the api sends one; answered, never stored.
            cycle.replies.append(self._replying(
                str(request_id)[:MAX_REQUEST_ID_CHARS], ok=False, code="INVALID_ARGUMENT",
                message="request_id: 1 to 200 printable characters are required",
                correlation_id=correlation_of(message), error_field="request_id"))
            return
        handler(message.record, now, cycle)

    def _replying(self, request_id: str, ok: bool, code: str | None = None,
                  message: str | None = None, correlation_id: str | None = None,
                  error_field: str | None = None) -> Outgoing:
        return messages.reply(self._topics, request_id, ok, code, message, None, None,
                              correlation_id, error_field)
