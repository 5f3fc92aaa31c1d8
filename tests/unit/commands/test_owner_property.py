"""Property: whatever schema-valid commands and reports reach the inbox, no owner cycle
raises, every command is answered, and everything the owner writes is a valid record
(DESIGN invariant 9). Each example runs a few cycles, the last ones days later, so the
messages' jobs fire, time out and retry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronlog.domain.ids import job_id_for_request
from cronlog.infra.avro.codec import AvroCodec, CodecError
from cronlog.ports import InboundMessage
from tests.support.clock import T0, FakeClock
from tests.support.examples import examples
from tests.support.owner import make_owner
from tests.support.owner_inbox import SPEC, create_message
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport
from tests.unit.avro.records_strategy import newest_schemas, records

INBOX = ("CreateJob", "UpdateJob", "PauseJob", "ResumeJob", "DeleteJob", "TriggerJob",
         "BackfillJob", "CancelRun", "AttemptStartedReport", "AttemptFinishedReport",
         "HeartbeatReport")
SCHEMAS = newest_schemas()
CODEC = AvroCodec()
JOB = job_id_for_request(SPEC.tenant, "seed")


def inbox_messages(run_ids: list[Any]) -> st.SearchStrategy[list[tuple[str, dict[str, Any]]]]:
    one = st.one_of(*(st.tuples(st.just(name), records(SCHEMAS[name], [JOB], run_ids))
                      for name in INBOX if name in SCHEMAS))
    return st.lists(one, min_size=1, max_size=12)


def seeded() -> tuple[FakeStore, FakeTransport, FakeClock, Any, list[Any]]:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock, start_timeout=timedelta(seconds=30))
    transport.inbox.append(create_message(SPEC, "seed"))
    owner.cycle()
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    return store, transport, clock, owner, list(store.runs)


SEED_RUNS = seeded()[4]


def as_read(batch: list[tuple[str, dict[str, Any]]]) -> list[InboundMessage]:
    """The messages as the owner's transport hands them over: encoded, then decoded."""
    read = []
    for offset, (name, record) in enumerate(batch):
        try:
            raw = CODEC.encode(name, record)
        except (CodecError, ValueError, TypeError, OverflowError):
            continue  # cannot be on the topic at all
        decoded_name, decoded = CODEC.decode(raw)
        read.append(InboundMessage("inbox", 0, 100 + offset, decoded_name, decoded, raw))
    return read


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=examples(300), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=inbox_messages(SEED_RUNS))
def test_no_inbox_message_makes_an_owner_cycle_raise(batch: list[tuple[str, dict[str, Any]]]
                                                     ) -> None:
    _store, transport, clock, owner, _ = seeded()
    messages = as_read(batch)
    transport.inbox.extend(messages)
    before = len(transport.transactions)
    for later in (timedelta(seconds=2), timedelta(minutes=5), timedelta(days=3)):
        clock.at = T0 + later
        owner.cycle()
    written = [o for tx in transport.transactions[before:] for o in tx]
    for out in written:
        CODEC.encode(out.name, out.record)  # the real transport would refuse it otherwise
    replied = {str(o.record["request_id"]) for o in written if o.name == "CommandReply"}
    for message in messages:
        if "request_id" in message.record:
            assert str(message.record["request_id"]) in replied, message.name
