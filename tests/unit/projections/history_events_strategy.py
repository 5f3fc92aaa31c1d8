"""Hypothesis strategies for what the history projector reads: schema-valid records of every
run and job event, as arbitrary ones and as stories that make sense (a run scheduled, then
its attempts, versions increasing; a job created, then its lifecycle), read the way the
feed hands them over (encoded with the real codec, then decoded)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid5

from hypothesis import strategies as st

from cronlog.infra.avro.codec import AvroCodec, CodecError
from cronlog.ports import InboundMessage
from cronlog.projections.history import KNOWN_EVENTS
from tests.unit.avro.records_strategy import newest_schemas, records

SCHEMAS = newest_schemas()
CODEC = AvroCodec()
RUN_EVENTS = sorted(n for n in KNOWN_EVENTS if n in SCHEMAS)
JOB_EVENTS = sorted(n for n in SCHEMAS if n.startswith("Job"))
# Run-events topic records the projector does not know yet: not generated (a test names them).
UNKNOWN_RUN_EVENTS = sorted(n for n in SCHEMAS if n.startswith(("Run", "Attempt"))
                            and not n.endswith("Report") and n not in KNOWN_EVENTS)
RUN_TOPIC, JOB_TOPIC = "run-events", "job-events"

_NS = UUID("8f1d6a3e-4c1b-4a59-9a57-3c0e3f0b7d21")
# Few ids, so arbitrary events often land on runs and jobs a story has created.
JOBS = [uuid5(_NS, f"job-{i}") for i in range(3)]
RUNS = [uuid5(_NS, f"run-{i}") for i in range(6)]
# A run id is derived from its job and fire time (domain/ids.py): every event naming a run
# names one fire time. Two fire times under one id is no log an owner writes.
FIRE_TIMES = {str(run): datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=7 * i)
              for i, run in enumerate(RUNS)}
TIMES = ("at", "scheduled_at", "not_before", "started_at", "finished_at", "fired_at", "first",
         "last", "after", "until", "logical_time", "opened_at")

# Most stories keep times and counts in range; the rest keep every arbitrary value.
SANE = st.sampled_from([True] * 7 + [False])
Draw = Callable[[st.SearchStrategy[Any]], Any]
Event = tuple[str, dict[str, Any]]


def _pin_fire_time(record: dict[str, Any]) -> dict[str, Any]:
    fire_time = FIRE_TIMES.get(str(record.get("run_id")))
    if fire_time is not None and "scheduled_at" in record:
        record["scheduled_at"] = fire_time
    return record


def arbitrary(name: str) -> st.SearchStrategy[Event]:
    return st.tuples(st.just(name), records(SCHEMAS[name], JOBS, RUNS).map(_pin_fire_time))


def _sane_times(draw: Draw, record: dict[str, Any], base: datetime) -> None:
    for key in TIMES:
        if key in record:
            record[key] = base + timedelta(microseconds=draw(st.integers(0, 3_600_000_000)))


def _event(draw: Draw, name: str, ids: dict[str, Any], version: int, sane: bool,
           base: datetime, attempt: int | None = None) -> Event:
    record = dict(draw(records(SCHEMAS[name], JOBS, RUNS)))
    record.update({k: str(v) for k, v in ids.items()}, version=version)
    if sane:
        _sane_times(draw, record, base)
        if attempt is not None and "attempt" in record:
            record["attempt"] = attempt
        if "max_attempts" in record:
            record["max_attempts"] = draw(st.integers(1, 5))
        if "count" in record:
            record["count"] = draw(st.integers(1, 1000))
        if "depth" in record:
            record["depth"] = draw(st.integers(0, 64))
    return name, _pin_fire_time(record)


@st.composite
def run_story(draw: Draw) -> list[Event]:
    """A run as the owner writes it: scheduled (or recorded as not run), then attempt by
    attempt dispatched, started and ended, then maybe ended as a whole; `sane` keeps times
    and counts in range, otherwise every other field stays arbitrary."""
    ids = {"run_id": draw(st.one_of(st.sampled_from(RUNS), st.uuids())),
           "job_id": draw(st.sampled_from(JOBS))}
    sane = draw(SANE)
    base = draw(st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1),
                             timezones=st.just(UTC)))
    version = draw(st.integers(1, 5))
    first = draw(st.sampled_from(["RunScheduled", "RunScheduled", "RunScheduled",
                                  "RunMissed", "RunSkipped"]))
    story = [_event(draw, first, ids, version, sane, base, draw(st.integers(0, 1)))]
    for attempt in range(1, draw(st.integers(0, 3)) + 1):
        steps = ["AttemptWaiting"] if draw(st.booleans()) else []
        steps.append("AttemptDispatched")
        if draw(st.integers(0, 3)):
            steps.append("AttemptStarted")
        if draw(st.integers(0, 3)):
            steps.append(draw(st.sampled_from(["AttemptSucceeded", "AttemptFailed",
                                               "AttemptLost", "AttemptTimedOut",
                                               "AttemptCancelled"])))
        for name in steps:
            if name in SCHEMAS:
                version += draw(st.integers(1, 2))
                story.append(_event(draw, name, ids, version, sane, base, attempt))
    if draw(st.booleans()):
        version += 1
        end = draw(st.sampled_from(["RunSucceeded", "RunFailed", "RunCancelled"]))
        story.append(_event(draw, end, ids, version, sane, base))
    if story and draw(st.booleans()):  # redelivered: the same record again, later
        story.append(draw(st.sampled_from(story)))
    return story


@st.composite
def job_story(draw: Draw) -> list[Event]:
    ids = {"job_id": draw(st.sampled_from(JOBS))}
    sane = draw(SANE)
    base = draw(st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1),
                             timezones=st.just(UTC)))
    version = draw(st.integers(1, 5))
    story = [_event(draw, "JobCreated", ids, version, sane, base)]
    for name in draw(st.lists(st.sampled_from([n for n in JOB_EVENTS if n != "JobCreated"]),
                              max_size=5)):
        version += draw(st.integers(1, 2))
        story.append(_event(draw, name, ids, version, sane, base))
    if draw(st.booleans()):
        story.append(draw(st.sampled_from(story)))
    return story


def _one(names: Sequence[str]) -> st.SearchStrategy[list[Event]]:
    return st.one_of(*(arbitrary(n) for n in names)).map(lambda e: [e])


# Mostly stories: an arbitrary event is most often one of a run or job never seen.
CHUNKS = st.one_of(_one(RUN_EVENTS), _one(JOB_EVENTS), run_story(), run_story(), run_story(),
                   run_story(), job_story(), job_story())


@st.composite
def event_log(draw: Draw, min_chunks: int = 4, max_chunks: int = 16) -> list[Event]:
    """Stories and arbitrary events, interleaved the way partitions and owners mix them
    (each story keeps its own order)."""
    chunks = [list(c) for c in draw(st.lists(CHUNKS, min_size=min_chunks, max_size=max_chunks))]
    log: list[Event] = []
    while chunks:
        live = [c for c in chunks if c]
        if not live:
            break
        chunk = live[draw(st.integers(0, len(live) - 1))] if len(live) > 1 else live[0]
        log.append(chunk.pop(0))
        chunks = [c for c in chunks if c]
    return log


def as_read(log: list[Event], first_offset: int = 0) -> list[InboundMessage]:
    """The events as the feed hands them over; a record the codec cannot encode cannot be
    on a topic at all and is left out."""
    read = []
    for offset, (name, record) in enumerate(log, start=first_offset):
        try:
            raw = CODEC.encode(name, record)
        except (CodecError, ValueError, TypeError, OverflowError):
            continue
        decoded_name, decoded = CODEC.decode(raw)
        topic = JOB_TOPIC if decoded_name.startswith("Job") else RUN_TOPIC
        read.append(InboundMessage(topic, 0, offset, decoded_name, decoded, raw))
    return read
