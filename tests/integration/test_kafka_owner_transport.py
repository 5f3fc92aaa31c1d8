"""KafkaOwnerTransport against a real broker: one transaction carries events and offsets,
readers see only committed ones, and a newer owner with the same id fences the old one."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from cronlog.commands.owner.ports import Outgoing
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.kafka.owner_transaction import OwnerFenced
from cronlog.infra.kafka.owner_transport import KafkaOwnerTransport
from cronlog.infra.kafka.topics import ensure_core_topics
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration
CODEC = AvroCodec()


def reply(request_id: str) -> Outgoing:
    return Outgoing("", request_id, "CommandReply", {
        "request_id": request_id, "ok": True, "error_code": None, "error_message": None,
        "job_id": None, "job_version": None, "correlation_id": None, "error_field": None,
        "repeated": False})


def committed_replies(settings: Settings) -> list[str]:
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "probe",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(settings.replies_topic, p, 0)
                     for p in range(settings.partitions)])
    seen: list[str] = []
    eof = 0
    while eof < settings.partitions:
        m = consumer.poll(5)
        if m is None:
            break
        if m.error():
            eof += 1
            continue
        seen.append(CODEC.decode(m.value())[1]["request_id"])  # type: ignore[arg-type]
    consumer.close()
    return seen


def make_transport(settings: Settings) -> tuple[KafkaOwnerTransport, list[int]]:
    assigned: list[int] = []
    transport = KafkaOwnerTransport(settings, CODEC, CODEC, on_assign=assigned.extend,
                                    on_revoke=lambda ps: None)
    transport.start()
    return transport, assigned


def test_transaction_commits_messages_and_a_fenced_owner_cannot(isolated: Settings) -> None:
    ensure_core_topics(isolated)
    first, assigned = make_transport(isolated)
    transports = [first]
    # Closed whatever happens: a consumer left open is destroyed by the garbage collector
    # later, in another test, where rd_kafka_destroy once waited forever for its threads.
    try:
        wait_for(lambda: (first.poll(0.2, 10), assigned)[1], 30, "inbox partitions assigned")
        out = [Outgoing(isolated.replies_topic, o.key, o.name, o.record)
               for o in [reply("a")]]
        produced = first.transact(out)
        assert [p.name for p in produced] == ["CommandReply"]
        assert committed_replies(isolated) == ["a"]

        # A second process with the same instance id (a restarted scheduler) fences the
        # first, once it is a member of the group: the first tells a twin (OwnerFenced)
        # from a takeover while it was away by the group's members (owner_transaction.py).
        second, second_assigned = make_transport(isolated)
        transports.append(second)
        wait_for(lambda: (first.poll(0.2, 10), second.poll(0.2, 10), second_assigned)[2],
                 60, "the second owner in the group")
        second.transact([])  # its producer's init bumps the transactional id's epoch
        with pytest.raises(OwnerFenced):
            first.transact([Outgoing(isolated.replies_topic, "z", "CommandReply",
                                     reply("zombie").record)])
        assert committed_replies(isolated) == ["a"], "the zombie's write never became visible"
    finally:
        for transport in reversed(transports):
            transport.close()
