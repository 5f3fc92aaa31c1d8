"""Reading what has arrived without waiting for a batch to fill.

librdkafka's batch consume (`Consumer.consume(num_messages, timeout)`) returns when it has
`num_messages` or when `timeout` has passed: with fewer messages waiting it sits out the
whole timeout. Every hop of a command (the api's inbox write, the owner's poll, the api's
reply read) then cost a poll timeout however idle the service: an idle CreateJob took about
200 ms, two 100 ms waits. `ready_messages` waits at most `timeout` for the first message
only, and takes what else has arrived already. The command path reads with it; the
projector and the workers keep their batch reads, whose waits batch their stores' writes
(a ClickHouse insert per few events would make parts faster than it merges them)."""

from __future__ import annotations

from confluent_kafka import Consumer, Message


def ready_messages(consumer: Consumer, max_messages: int, timeout: float) -> list[Message]:
    """Up to max_messages: the first within `timeout`, then only those already fetched."""
    first = consumer.poll(timeout)
    if first is None:
        return []
    if max_messages <= 1:
        return [first]
    return [first, *consumer.consume(num_messages=max_messages - 1, timeout=0)]
