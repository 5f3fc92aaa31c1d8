"""CommandBatch and CommandReplies without a broker (issue 34, item 2): an api's commands for
one inbox partition go as one message and come out as the single commands they stand for,
a bad one failing alone; an owner cycle's replies that asked to go together go as one
message per api, the others alone."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from confluent_kafka import TopicPartition

from cronlog.commands.owner.ports import Outgoing
from cronlog.commands.reply_routes import answered_together, reply_key, routed
from cronlog.domain.catalogue import Command, Envelope, JobEvent, OwnerRecord
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.kafka.command_batches import (
    MAX_BATCH_COMMANDS,
    batched_commands,
    command_batch,
    command_replies,
    cut,
    packed_replies,
    reply_chunks,
    split_replies,
)
from cronlog.infra.kafka.inbox_backlog import InboxBacklog
from cronlog.infra.kafka.owner_transport import KafkaOwnerTransport
from cronlog.ports import UNREADABLE, InboundMessage

CODEC = AvroCodec()
AT = datetime(2026, 12, 6, 7, 0, tzinfo=UTC)


def pause(job: str, request_id: str) -> bytes:
    return CODEC.encode(Command.PAUSE_JOB, {"request_id": request_id, "job_id": job, "at": AT,
                                            "correlation_id": routed("api-1", request_id,
                                                                     together=True)})


def arrived(value: bytes, offset: int = 7) -> InboundMessage:
    name, record = CODEC.decode(value)
    return InboundMessage(topic="inbox", partition=3, offset=offset, name=name,
                          record=record, raw=value, key="first")


def test_a_batch_stands_for_its_commands_in_order_each_at_the_batchs_place() -> None:
    jobs = [str(uuid4()) for _ in range(3)]
    items = [(i, job, pause(job, f"r{i}")) for i, job in enumerate(jobs)]
    found = batched_commands(arrived(command_batch(CODEC, items)), CODEC)
    assert [(m.name, m.key, m.record["request_id"]) for m in found] == [
        (Command.PAUSE_JOB, job, f"r{i}") for i, job in enumerate(jobs)]
    assert {(m.topic, m.partition, m.offset) for m in found} == {("inbox", 3, 7)}
    assert [m.raw for m in found] == [raw for _, _, raw in items]


def test_a_command_that_does_not_decode_or_is_not_a_command_fails_alone() -> None:
    job = str(uuid4())
    report = CODEC.encode(Envelope.COMMAND_REPLIES, {"replies": []})
    items = [(0, job, pause(job, "good")), (1, "k1", b"\xc3\x01garbage!"), (2, "k2", report)]
    found = batched_commands(arrived(command_batch(CODEC, items)), CODEC)
    assert [m.name for m in found] == [Command.PAUSE_JOB, UNREADABLE, UNREADABLE]
    assert "CommandReplies" in found[2].record["error"]
    assert [m.key for m in found] == [job, "k1", "k2"], "each keeps its own key"


def test_a_batch_over_its_bound_is_one_unreadable_message() -> None:
    items = [(i, "k", pause(str(uuid4()), f"r{i}")) for i in range(MAX_BATCH_COMMANDS + 1)]
    found = batched_commands(arrived(command_batch(CODEC, items)), CODEC)
    assert [m.name for m in found] == [UNREADABLE]
    assert str(MAX_BATCH_COMMANDS) in found[0].record["error"]


def test_batches_are_cut_by_count_and_by_bytes_and_a_large_command_goes_alone() -> None:
    items = [(i, "k", b"x" * 10) for i in range(10)]
    assert [[i for i, _, _ in b] for b in cut(items, most=4)] == [[0, 1, 2, 3], [4, 5, 6, 7],
                                                                 [8, 9]]
    big = [(0, "k", b"x" * 100), (1, "k", b"x" * 900), (2, "k", b"x" * 100)]
    assert [[i for i, _, _ in b] for b in cut(big, most=64, most_bytes=1000)] == [
        [0], [1], [2]]
    assert list(cut([])) == []


def reply(request_id: str, correlation: str | None) -> Outgoing:
    return Outgoing("replies", reply_key(correlation) or "job-key", OwnerRecord.COMMAND_REPLY, {
        "request_id": request_id, "ok": True, "error_code": None, "error_message": None,
        "job_id": None, "job_version": 1, "correlation_id": correlation, "error_field": None,
        "repeated": False})


def test_only_replies_that_asked_go_together_one_group_per_api() -> None:
    event = Outgoing("job-events", "j", JobEvent.PAUSED, {})
    a1 = reply("a1", routed("api-a", "b-0", together=True))
    a2 = reply("a2", routed("api-a", "b-1", together=True))
    b1 = reply("b1", routed("api-b", "c-0", together=True))
    alone = reply("single", routed("api-a", "d"))  # a CreateJob of its own
    old = reply("old", "no-route")  # an api older than reply keys
    stays, together = split_replies([event, a1, alone, b1, a2, old])
    assert stays == [event, alone, old]
    assert together == [[a1, a2], [b1]]
    assert answered_together(routed("api-a", "x", together=True))
    assert not answered_together(routed("api-a", "x"))
    assert not answered_together("+no-route") and not answered_together(None)


def test_packed_replies_come_out_as_the_replies_they_carry() -> None:
    replies = [reply(f"r{i}", routed("api-a", f"b-{i}", together=True)) for i in range(3)]
    packed = command_replies(CODEC, [CODEC.encode(r.name, r.record) for r in replies]
                             + [b"\xc3\x01not a reply"])
    name, record = CODEC.decode(packed)
    assert name == Envelope.COMMAND_REPLIES
    assert [r["request_id"] for r in packed_replies(record, CODEC)] == ["r0", "r1", "r2"]


class Fetched:
    """A consumed Kafka message, as the owner's poll reads it."""

    def __init__(self, offset: int, value: bytes) -> None:
        self._offset, self._value = offset, value

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes:
        return b"first"

    def topic(self) -> str:
        return "inbox"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


class Consumer:
    def __init__(self, waiting: list[Fetched]) -> None:
        self.waiting = waiting

    def poll(self, timeout: float) -> Fetched | None:
        return self.waiting.pop(0) if self.waiting else None

    def consume(self, num_messages: int, timeout: float) -> list[Fetched]:
        taken, self.waiting = self.waiting[:num_messages], self.waiting[num_messages:]
        return taken

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, 2) for tp in partitions]


class Watchdog:
    def check(self) -> None:
        pass


def test_the_owner_reads_a_batch_as_its_commands_and_keeps_what_it_left_of_it() -> None:
    made = object.__new__(KafkaOwnerTransport)
    made._inbox, made._decoder = "inbox", CODEC
    made._watchdog = Watchdog()  # type: ignore[assignment]
    made._assigned, made._backlog = {0}, InboxBacklog()
    made._settled, made._start_offsets, made._handing_over = {}, {}, False
    jobs = [str(uuid4()) for _ in range(5)]
    batch = command_batch(CODEC, [(i, job, pause(job, f"r{i}")) for i, job in enumerate(jobs)])
    made._consumer = Consumer(  # type: ignore[assignment]
        [Fetched(0, batch), Fetched(1, pause(jobs[0], "alone"))])
    polled = made.poll(0.0, 3)
    # The batch alone fills the poll's 3: the next message waits for the next poll.
    assert [m.record["request_id"] for m in polled] == ["r0", "r1", "r2", "r3", "r4"]
    # The owner decided two of the batch: the rest is kept whole at the batch's offset, so
    # the committed position stays at the batch until all of it is decided.
    made.put_back(polled[2:])
    assert [tp.offset for tp in made._positions()] == [0]
    again = made.poll(0.0, 3)
    assert [m.record["request_id"] for m in again] == ["r2", "r3", "r4", "alone"]


def test_replies_are_cut_by_count_and_by_bytes_and_a_large_one_goes_alone() -> None:
    out = [(reply(f"r{i}", None), b"x" * size) for i, size in enumerate([10, 10, 10, 900, 10])]
    assert [[o.record["request_id"] for o, _ in c] for c in reply_chunks(out, most=2)] == [
        ["r0", "r1"], ["r2", "r3"], ["r4"]]
    assert [len(c) for c in reply_chunks(out, most=500, most_bytes=100)] == [3, 1, 1]
