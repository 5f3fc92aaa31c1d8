"""KafkaCommandChannel: the api's way to the owners — commands to the inbox, replies back.

Every api instance reads one partition of the replies topic from its end, the partition of
a reply key it takes at start, and hands each reply to the request waiting for it; replies
for requests of other instances whose key falls in the same partition are ignored. Each send
gets a correlation id of its own (the reply key and a uuid4: commands/reply_routes.py) that
the owner copies into its reply and keys the reply by: request ids are the clients' and two
tenants may send the same one at the same moment.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, wait
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

from cronlog.commands.messages import CommandMessage
from cronlog.commands.reply_routes import routed
from cronlog.domain.catalogue import Envelope, OwnerRecord
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config, producer_config
from cronlog.infra.kafka.command_batches import command_batch, cut, packed_replies
from cronlog.infra.kafka.log_bounds import LogBounds, TopicPartitionKey
from cronlog.infra.kafka.messages import MessageDecoder, MessageEncoder, inbound
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.infra.kafka.ready_messages import ready_messages
from cronlog.infra.observability.kafka_stats import STATISTICS_INTERVAL_MS
from cronlog.ports import Record

log = logging.getLogger(__name__)

# The reply reader goes round at least every 0.1 s; this long without a round it is stuck.
READER_STUCK_AFTER = 10.0
# A topic created moments before has partitions without a leader for a while (seconds at
# 1,024 partitions on one broker): the api asks for their ends this long before it gives up.
START_WITHIN = 60.0
START_RETRY_PAUSE = 0.5


class CommandNotAnswered(TimeoutError):
    """No owner replied in time; the command may still be applied (retry with the same id)."""


class CommandNotSent(RuntimeError):
    """The inbox did not acknowledge the command."""


def log_ends(bounds: Callable[[list[TopicPartitionKey]],
                             Mapping[TopicPartitionKey, tuple[int, int]]],
             keys: list[TopicPartitionKey], within: float,
             pause: float = START_RETRY_PAUSE,
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> dict[TopicPartitionKey, int]:
    """The last stable offset of each partition, asked again while the broker cannot answer
    yet (NOT_LEADER_FOR_PARTITION on a fresh topic); raises its KafkaException after
    `within` seconds."""
    deadline = clock() + within
    while True:
        try:
            found = bounds(keys)
            return {key: found[key][1] for key in keys}
        except KafkaException as exc:
            if clock() + pause >= deadline:
                raise
            log.warning("the ends of %d partitions are not known yet (%s); asking again",
                        len(keys), exc)
            sleep(pause)


class KafkaCommandChannel:
    def __init__(self, settings: Settings, encoder: MessageEncoder,
                 decoder: MessageDecoder,
                 explain: Callable[[int], str] | None = None,
                 producer_statistics: Callable[[str], None] | None = None,
                 consumer_statistics: Callable[[str], None] | None = None) -> None:
        """*_statistics: given each client's librdkafka statistics (JSON) every few seconds;
        the reply reader polls the producer for them between reads."""
        self._settings = settings
        # What an inbox partition's owner is doing, for a command that got no reply.
        self._explain = explain
        self._encoder = encoder
        self._decoder = decoder
        self._producer = Producer(producer_config(
            settings, **{"linger.ms": 1, **_observed(producer_statistics)}))
        self._consumer = Consumer(consumer_config(
            settings, None, **{"group.id": f"{settings.group_prefix}-api-{uuid.uuid4().hex[:8]}",
                               **_observed(consumer_statistics)}))
        # Sends waiting for their reply, by correlation id; and the correlation ids by
        # request id, for replies from owners older than correlation ids.
        self._waiting: dict[str, tuple[str, Future[Mapping[str, Any]]]] = {}
        self._by_request: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._read_replies, name="replies", daemon=True)
        self._reading: frozenset[int] = frozenset()
        # The inbox's partition count, to send a batch's commands for one partition as one
        # CommandBatch message; 0 until known (then each command goes alone).
        self._inbox_partitions = 0
        # The key whose partition of the replies topic this instance reads.
        self._reply_key = f"api-{uuid.uuid4().hex[:16]}"
        self._read_at = time.monotonic()
        self._stopped_by: str | None = None

    def start(self) -> None:
        topic = self._settings.replies_topic
        metadata = self._consumer.list_topics(topic, timeout=30)
        count = len(metadata.topics[topic].partitions)
        partitions = [partition_for(self._reply_key, count)] if count else []
        inbox = self._settings.inbox_topic
        found = self._consumer.list_topics(inbox, timeout=30).topics.get(inbox)
        self._inbox_partitions = len(found.partitions) if found is not None else 0
        # Explicit end offsets, so no reply produced after start() can be skipped.
        ends = log_ends(LogBounds(self._settings).of, [(topic, p) for p in partitions],
                        START_WITHIN)
        self._consumer.assign([TopicPartition(topic, p, ends[(topic, p)]) for p in partitions])
        self._reading = frozenset(partitions)
        if not partitions:
            log.error("the replies topic %s has no partitions (does it exist?): no command "
                      "can be answered", topic)
        self._read_at = time.monotonic()
        self._thread.start()
        self._ready.wait(30)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._producer.flush(10)
        self._consumer.close()

    def reader_problem(self) -> str | None:
        """Why no reply can reach a waiting command now; None while the reader reads."""
        if self._stopped_by is not None:
            return f"the reply reader has stopped: {self._stopped_by}"
        if not self._thread.is_alive():
            return "the reply reader is not running"
        if not self._reading:
            return (f"the reply reader reads no partition of {self._settings.replies_topic} "
                    "(does the topic exist?)")
        silent = time.monotonic() - self._read_at
        if silent > READER_STUCK_AFTER:
            return f"the reply reader has not read for {silent:.0f} s (stuck)"
        return None

    def _read_replies(self) -> None:
        try:
            while not self._stop.is_set():
                messages = ready_messages(self._consumer, 100, 0.1)
                self._read_at = time.monotonic()
                self._ready.set()
                # Delivery reports and statistics of an idle producer come only from a poll.
                self._producer.poll(0)
                for m in messages:
                    self._answer(m)
        except Exception as exc:
            if not self._stop.is_set():
                self._stopped_by = f"{type(exc).__name__}: {exc}"[:300]
                log.exception("the reply reader stopped: no command can be answered")
            raise
        finally:
            self._ready.set()

    def _answer(self, message: Message) -> None:
        try:
            decoded = inbound(message, self._decoder)
        except KafkaException:
            raise  # fatal for the consumer: the reader cannot go on
        except Exception as exc:
            # One reply that does not decode must not leave every later command unanswered.
            log.warning("reply at %s[%s]@%s set aside: %s", message.topic(),
                        message.partition(), message.offset(), exc)
            return
        if decoded is None:
            return
        replies: list[Mapping[str, Any]]
        if decoded.name == OwnerRecord.COMMAND_REPLY:
            replies = [decoded.record]
        elif decoded.name == Envelope.COMMAND_REPLIES:
            replies = packed_replies(decoded.record, self._decoder)
        else:
            return
        for reply in replies:
            future = self._claim(reply)
            if future is not None and not future.done():
                future.set_result(reply)

    def _claim(self, reply: Mapping[str, Any]) -> Future[Mapping[str, Any]] | None:
        """The send a reply answers, if it is this instance's."""
        with self._lock:
            correlation = reply.get("correlation_id")
            if not correlation:
                waiting = self._by_request.get(str(reply["request_id"]))
                if not waiting:
                    return None
                correlation = waiting[0]
            return self._forget_locked(str(correlation))

    def send(self, command: CommandMessage, timeout: float) -> Mapping[str, Any]:
        """Sends a command and returns the owner's CommandReply record."""
        key, name, record, request_id = _parts(command)
        future: Future[Mapping[str, Any]] = Future()
        correlation = routed(self._reply_key, uuid.uuid4().hex)
        record = {**record, "correlation_id": correlation}
        with self._lock:
            self._waiting[correlation] = (request_id, future)
            self._by_request.setdefault(request_id, []).append(correlation)
        delivered: list[str] = []
        partition: list[int] = []

        def on_delivery(err: object, msg: Message) -> None:
            delivered.append("" if err is None else str(err))
            if err is None:
                partition.append(msg.partition() or 0)

        try:
            self._producer.produce(self._settings.inbox_topic, key=key.encode(),
                                   value=self._encoder.encode(name, record),
                                   on_delivery=on_delivery)
            self._producer.flush(timeout)
        except (KafkaException, BufferError) as exc:
            self._forget(correlation)
            raise CommandNotSent(f"inbox did not take {name}: {exc}") from exc
        if not delivered or delivered[0]:
            self._forget(correlation)
            raise CommandNotSent(f"inbox did not acknowledge {name}: {delivered}")
        deadline = time.monotonic() + timeout
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError as exc:
            waited_for = (f"; {self._explain(partition[0])}"
                          if self._explain is not None and partition else "")
            raise CommandNotAnswered(
                f"{name} {request_id}: no reply within {timeout:.1f}s from the scheduler "
                f"of inbox partition {partition[0] if partition else '?'}{waited_for}. "
                "It may still be applied: retry with the same request id") from exc
        finally:
            self._forget(correlation)

    def send_many(self, commands: Sequence[CommandMessage],
                  timeout: float) -> list[Mapping[str, Any] | Exception]:
        """Sends commands all at once, then waits for their
        replies until one deadline: a batch costs one round trip, not one per command.
        The commands for one inbox partition go as CommandBatch messages and ask for their
        replies together (infra/kafka/command_batches.py).

        Each result is the owner's CommandReply record, or that command's own
        CommandNotSent / CommandNotAnswered: one command's fate is not the others'.
        """
        deadline = time.monotonic() + timeout
        futures: list[Future[Mapping[str, Any]]] = []
        correlations: list[str] = []
        outcome: dict[int, str] = {}
        partitions: dict[int, int] = {}
        results: list[Mapping[str, Any] | Exception | None] = [None] * len(commands)

        def delivery(indexes: Sequence[int]) -> Callable[[object, Message], None]:
            def on_delivery(err: object, msg: Message) -> None:
                for index in indexes:
                    outcome[index] = "" if err is None else str(err)
                    if err is None:
                        partitions[index] = msg.partition() or 0
            return on_delivery

        # One random part for the batch (uuid4 a command cost more than producing it), the
        # index making each command's own.
        batch = routed(self._reply_key, uuid.uuid4().hex, together=True)
        by_partition: dict[int, list[tuple[int, str, bytes]]] = {}
        try:
            for index, command in enumerate(commands):
                key, name, record, request_id = _parts(command)
                correlation = f"{batch}-{index}"
                future: Future[Mapping[str, Any]] = Future()
                with self._lock:
                    self._waiting[correlation] = (request_id, future)
                    self._by_request.setdefault(request_id, []).append(correlation)
                futures.append(future)
                correlations.append(correlation)
                try:
                    encoded = self._encoder.encode(name, {**record, "correlation_id": correlation})
                except ValueError as exc:  # the codec's InvalidRecord
                    results[index] = CommandNotSent(f"{name} not encoded: {exc}")
                    continue
                partition = (partition_for(key, self._inbox_partitions)
                             if self._inbox_partitions else -1)
                by_partition.setdefault(partition, []).append((index, key, encoded))
            for partition, items in by_partition.items():
                for part in cut(items) if partition >= 0 else [[item] for item in items]:
                    indexes = [index for index, _, _ in part]
                    value = part[0][2] if len(part) == 1 else command_batch(self._encoder, part)
                    try:
                        self._produce_waiting(part[0][1], value, partition, delivery(indexes),
                                              deadline)
                    except (KafkaException, BufferError) as exc:
                        for index in indexes:
                            results[index] = CommandNotSent(
                                f"inbox did not take {commands[index].NAME}: {exc}")
            self._producer.flush(max(0.0, deadline - time.monotonic()))
            for index, command in enumerate(commands):
                if results[index] is None and outcome.get(index, "?") != "":
                    results[index] = CommandNotSent(f"inbox did not acknowledge "
                                                    f"{command.NAME}: "
                                                    f"{outcome.get(index, 'no report')}")
            wait([f for i, f in enumerate(futures) if results[i] is None],
                 timeout=max(0.0, deadline - time.monotonic()))
            for index, command in enumerate(commands):
                name, request_id = command.NAME, command.request_id
                if results[index] is not None:
                    continue
                if futures[index].done():
                    results[index] = futures[index].result()
                    continue
                at = partitions.get(index)
                waited_for = (f"; {self._explain(at)}"
                              if self._explain is not None and at is not None else "")
                results[index] = CommandNotAnswered(
                    f"{name} {request_id}: no reply within {timeout:.1f}s from the scheduler "
                    f"of inbox partition {at if at is not None else '?'}"
                    f"{waited_for}. It may still be applied: retry with the same request id")
        finally:
            with self._lock:
                for correlation in correlations:
                    self._forget_locked(correlation)
        return [r if r is not None else CommandNotSent("not sent") for r in results]

    def _produce_waiting(self, key: str, value: bytes, partition: int,
                         on_delivery: Callable[[object, Message], None],
                         deadline: float) -> None:
        """Produces one message to the inbox (at `partition`, or by its key when -1),
        waiting for room in the producer's queue until deadline."""
        while True:
            try:
                if partition >= 0:
                    self._producer.produce(self._settings.inbox_topic, key=key.encode(),
                                           value=value, partition=partition,
                                           on_delivery=on_delivery)
                else:
                    self._producer.produce(self._settings.inbox_topic, key=key.encode(),
                                           value=value, on_delivery=on_delivery)
                return
            except BufferError:
                if time.monotonic() >= deadline:
                    raise
                self._producer.poll(0.05)

    def _forget(self, correlation: str) -> None:
        with self._lock:
            self._forget_locked(correlation)

    def _forget_locked(self, correlation: str) -> Future[Mapping[str, Any]] | None:
        found = self._waiting.pop(correlation, None)
        if found is None:
            return None
        request_id, future = found
        waiting = self._by_request.get(request_id, [])
        if correlation in waiting:
            waiting.remove(correlation)
        if not waiting:
            self._by_request.pop(request_id, None)
        return future


def _parts(command: CommandMessage) -> tuple[str, str, Record, str]:
    """A command's inbox key, name, record and request id."""
    return command.key, command.NAME, command.record(), command.request_id


def _observed(statistics: Callable[[str], None] | None) -> dict[str, object]:
    return {} if statistics is None else {"statistics.interval.ms": STATISTICS_INTERVAL_MS,
                                          "stats_cb": statistics}
