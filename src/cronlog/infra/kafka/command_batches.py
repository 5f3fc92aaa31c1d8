"""CommandBatch and CommandReplies messages (issue 34, item 2): how an api's commands for one
inbox partition travel as one message, and an owner cycle's replies to one api as one.

A CreateJobs call of 1,000 jobs was 1,000 inbox messages and 1,000 replies: each produced,
fetched, decoded and dispatched on its own, about a quarter of the api's CPU a job and a
tenth of the owner's. Packed, each command and reply is still encoded as a message of its
own (its own schema fingerprint, so each keeps its versions), inside one Kafka message per
(call, partition) or per (cycle, api).

What stays as it was: the owner decides each command of a batch on its own, at the batch's
place in the inbox (one bad command fails only itself, DESIGN invariant 9); a batch is one
Kafka message, so its partition's committed offset stays at it until every command of it is
decided, and after a crash its decided commands are decided again by their request ids,
which answers them the same way and writes nothing new (commands/owner/inbox_shares.py). Plain
data and the codec, no Kafka client, so the rules are tested without a broker.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cronlog.batching import sized_batches
from cronlog.commands.owner.ports import Outgoing
from cronlog.commands.reply_routes import answered_together
from cronlog.domain.catalogue import Command, Envelope, OwnerRecord
from cronlog.infra.kafka.messages import MessageDecoder, MessageEncoder
from cronlog.ports import UNREADABLE, InboundMessage

# Commands per CommandBatch at most: what one inbox message may make an owner decide (a
# wave of CreateJobs sends about 32 per partition).
MAX_BATCH_COMMANDS = 64
# Replies per CommandReplies at most.
MAX_PACKED_REPLIES = 500
# Encoded bytes per batch at most: half the broker's and producer's default message limit
# of about 1 MiB (infra/kafka/report_batches.py says why half). A command is at most a
# 256 KiB payload and its spec, so one always fits alone.
MAX_BATCH_BYTES = 512 * 1024
# Encoded bytes of a batch item besides its command: its key (a uuid as text) and framing.
ITEM_OVERHEAD = 64
COMMANDS = frozenset(Command)


def cut(items: Sequence[tuple[int, str, bytes]], most: int = MAX_BATCH_COMMANDS,
        most_bytes: int = MAX_BATCH_BYTES) -> Iterator[list[tuple[int, str, bytes]]]:
    """(index, key, encoded command) items of one partition, in order, cut into batches of
    at most `most` commands and about `most_bytes` bytes."""
    return sized_batches(items, lambda item: len(item[2]) + len(item[1]) + ITEM_OVERHEAD,
                         most, most_bytes)


def command_batch(encoder: MessageEncoder, items: Sequence[tuple[int, str, bytes]]) -> bytes:
    """The CommandBatch message of (index, key, encoded command) items."""
    return encoder.encode(Envelope.COMMAND_BATCH, {
        "commands": [{"key": key, "command": command} for _, key, command in items]})


def batched_commands(message: InboundMessage, decoder: MessageDecoder) -> list[InboundMessage]:
    """The commands a CommandBatch message stands for, in order, each at the message's
    place in the inbox. A command that does not decode, or is not a command, is an
    UNREADABLE message of its own for the owner to set aside; a batch that is not one at all
    (too many commands, a malformed record: only a writer bypassing the api sends it) is one
    UNREADABLE message."""
    items = message.record.get("commands")
    if not isinstance(items, list) or len(items) > MAX_BATCH_COMMANDS:
        return [_unreadable(message, f"a CommandBatch carries 1 to {MAX_BATCH_COMMANDS} "
                                     "commands", message.raw, message.key)]
    found: list[InboundMessage] = []
    for item in items:
        key, raw = item["key"], item["command"]
        try:
            name, record = decoder.decode(raw)
        except ValueError as exc:  # CodecError is a ValueError
            found.append(_unreadable(message, f"{type(exc).__name__}: {exc}", raw, key))
            continue
        if name not in COMMANDS:
            found.append(_unreadable(message, f"a CommandBatch carries commands, not {name}",
                                     raw, key))
            continue
        found.append(InboundMessage(topic=message.topic, partition=message.partition,
                                    offset=message.offset, name=name, record=record,
                                    raw=raw, key=key))
    return found


def _unreadable(message: InboundMessage, error: str, raw: bytes,
                key: str | None) -> InboundMessage:
    return InboundMessage(topic=message.topic, partition=message.partition,
                          offset=message.offset, name=UNREADABLE, record={"error": error},
                          raw=raw, key=key)


def command_replies(encoder: MessageEncoder, replies: Sequence[bytes]) -> bytes:
    """The CommandReplies message of encoded CommandReply messages."""
    return encoder.encode(Envelope.COMMAND_REPLIES, {"replies": list(replies)})


def packed_replies(record: Mapping[str, Any],
                   decoder: MessageDecoder) -> list[Mapping[str, Any]]:
    """The CommandReply records a CommandReplies record carries; one that does not decode
    is left out (the command it answers is answered by its deadline: not answered)."""
    found: list[Mapping[str, Any]] = []
    for raw in record.get("replies") or []:
        try:
            name, reply = decoder.decode(raw)
        except ValueError:
            continue
        if name == OwnerRecord.COMMAND_REPLY:
            found.append(reply)
    return found


def split_replies(outgoing: Sequence[Outgoing]
                      ) -> tuple[list[Outgoing], list[list[Outgoing]]]:
    """What an owner's transaction writes alone, and the replies that asked to go together,
    by topic and key (the api they go to: commands/reply_routes.py)."""
    alone: list[Outgoing] = []
    together: dict[tuple[str, str], list[Outgoing]] = {}
    for out in outgoing:
        if out.name == OwnerRecord.COMMAND_REPLY and answered_together(
                out.record.get("correlation_id")):
            together.setdefault((out.topic, out.key), []).append(out)
        else:
            alone.append(out)
    return alone, list(together.values())


def reply_chunks(encoded: Sequence[tuple[Outgoing, bytes]], most: int = MAX_PACKED_REPLIES,
                 most_bytes: int = MAX_BATCH_BYTES
                 ) -> Iterator[list[tuple[Outgoing, bytes]]]:
    """Encoded replies to one api cut into CommandReplies messages of at most `most`
    replies and about `most_bytes` bytes (one reply always goes, however large)."""
    chunk: list[tuple[Outgoing, bytes]] = []
    size = 0
    for item in encoded:
        if chunk and (len(chunk) >= most or size + len(item[1]) > most_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += len(item[1])
    if chunk:
        yield chunk
