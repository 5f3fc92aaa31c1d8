"""Where an owner's reply goes: to the api instance that asked (issue 34).

Each api instance reads one partition of the replies topic, the partition of a reply key of
its own (a random name taken at start). It sends each command with a correlation id of the
form `<reply key>/<id>`; the owner copies the correlation id into its reply, as always, and
keys the reply by the reply key, so the producer's partitioner puts it in the partition that
api reads. An api then decodes its own replies (and those of any api whose key falls in the
same partition), not every api's, and an owner's transaction gains a partition per api its
commands came from, not one per inbox partition they came from.

A correlation id without a reply key (an api older than this) keys the reply as before, by
the command's own key: those apis read every partition. In a rolling upgrade the schedulers
go first, then the apis.

A correlation id whose own part starts with TOGETHER asks for its reply to be packed with
the cycle's other such replies to the same reply key into one CommandReplies message
(issue 34): the commands of a CreateJobs call come in CommandBatch messages, and a
thousand replies cost a thousand records to write and read. Only an api that reads
CommandReplies asks, so an older api keeps getting single replies."""

from __future__ import annotations

SEPARATOR = "/"
# Reply keys the owner takes: printable, and short (an api's is "api-" and 16 hex digits).
MAX_REPLY_KEY = 64
TOGETHER = "+"


def routed(reply_key: str, correlation: str, together: bool = False) -> str:
    """A correlation id that routes its command's reply to `reply_key`'s partition;
    `together`: packed with the cycle's other replies to that key."""
    return f"{reply_key}{SEPARATOR}{TOGETHER if together else ''}{correlation}"


def answered_together(correlation_id: str | None) -> bool:
    """Whether a reply may go packed in a CommandReplies message (see the module)."""
    if not correlation_id or reply_key(correlation_id) is None:
        return False
    return correlation_id.partition(SEPARATOR)[2].startswith(TOGETHER)


def reply_key(correlation_id: str | None) -> str | None:
    """The reply key a correlation id names, or None (none, or not a well-formed one)."""
    if not correlation_id:
        return None
    key, separator, _ = correlation_id.partition(SEPARATOR)
    if not separator or not 0 < len(key) <= MAX_REPLY_KEY or not key.isprintable():
        return None
    return key
