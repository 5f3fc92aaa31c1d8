"""Domain events as the owner's log holds them, for the Postgres owner state's tests: each
with its offset, its record and its Avro bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from cronlog.domain.calendar import Calendar
from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import event_to_record
from tests.support.clock import T0

CODEC = AvroCodec()


@dataclass(frozen=True)
class Logged:
    offset: int
    name: str
    record: dict[str, Any]
    raw: bytes


def logged(events: list[object], first_offset: int = 0) -> tuple[list[Logged], list[Logged]]:
    jobs: list[Logged] = []
    runs: list[Logged] = []
    for i, event in enumerate(events):
        name, record = event_to_record(event)
        item = Logged(first_offset + i, name, record, CODEC.encode(name, record))
        (jobs if name.startswith("Job") else runs).append(item)
    return jobs, runs


def a_job() -> Job:
    spec = JobSpec(name="n", tenant="t", queue="q", handler="echo", cron="*/5 * * * * *")
    return Job.create(uuid4(), spec, "req-" + uuid4().hex, T0)


def record(name: str, fields: dict[str, Any], offset: int) -> Logged:
    return Logged(offset, name, fields, CODEC.encode(name, fields))


def calendar_logged(calendar: Calendar, first_offset: int) -> list[Logged]:
    """A calendar's events, on the job-events topic."""
    return [record(*event_to_record(e), first_offset + i)
            for i, e in enumerate(calendar.collect_events())]
