"""Creates cronlog jobs fast: the api's CreateJob commands, put on the inbox in batches.

Each record is what the api's JobApi.create_job sends for the same request (validated
spec, job id derived from tenant and request id, the real Avro codec); only the wait for
each reply is left out, so thousands of commands are in flight at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import psycopg
from confluent_kafka import Producer

from cronlog.domain.ids import job_id_for_request
from cronlog.domain.spec import JobSpec, validate_spec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import spec_to_record
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import producer_config


class CommandsNotDelivered(RuntimeError):
    """The inbox did not acknowledge every CreateJob command."""


def send_create_commands(settings: Settings, request_prefix: str,
                         specs: Iterable[JobSpec]) -> int:
    """Produces one CreateJob per spec and waits until the inbox acknowledged them all."""
    codec = AvroCodec()
    producer = Producer(producer_config(settings, **{
        "linger.ms": 20, "batch.num.messages": 10_000, "queue.buffering.max.messages": 200_000}))
    failures: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    sent = 0
    for i, spec in enumerate(specs):
        spec = validate_spec(spec)
        request_id = f"{request_prefix}-{i}"
        job_id = str(job_id_for_request(spec.tenant, request_id))
        record = {"request_id": request_id, "job_id": job_id, "at": datetime.now(UTC),
                  "spec": spec_to_record(spec), "correlation_id": None,
                  # CreateJob v7 (issue 20): no named calendar.
                  "calendar_version": 0, "calendar_exclusions": []}
        value = codec.encode("CreateJob", record)
        while True:
            try:
                producer.produce(settings.inbox_topic, key=job_id.encode(), value=value,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1
        if sent % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining or failures:
        raise CommandsNotDelivered(f"{remaining} undelivered, errors: {failures[:3]}")
    return sent


def count_jobs(dsn: str, tenant: str) -> int:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute("SELECT count(*) FROM jobs WHERE tenant = %s", (tenant,)).fetchone()
    return int(row[0]) if row else 0


def wait_for_jobs(dsn: str, tenant: str, count: int, until: float, poll: float = 0.2,
                  progress: Callable[[int], None] | None = None) -> tuple[int, float]:
    """Waits until Postgres shows count jobs of the tenant or time.time() reaches until;
    returns how many it saw and when (epoch seconds) it last saw the count grow."""
    seen, at = 0, time.time()
    last_report = time.monotonic()
    while True:
        now_seen = count_jobs(dsn, tenant)
        if now_seen != seen:
            seen, at = now_seen, time.time()
        if seen >= count or time.time() >= until:
            return seen, at
        if progress is not None and time.monotonic() - last_report >= 10:
            progress(seen)
            last_report = time.monotonic()
        time.sleep(poll)
