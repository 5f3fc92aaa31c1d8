"""A calendar's update reaches its many followers by reference (issue 33, item 2;
docs/calendars.md): tenant B's calendar of a few hundred days is followed by 2,003 jobs
(CreateJobs); its update puts one CalendarPublished of a couple of hundred bytes per follower
on the inbox, naming the version only, where each used to carry every excluded day. The
followers' owner applies the calendars projection's row lazily, a bounded chunk a cycle
within its budget: every follower ends up on the new version with its next fire time per the
new days, every-second followers stop on the newly excluded day, and tenant A's every-second
canary keeps its start lag p99 within 2 s with every fire time once meanwhile."""

from __future__ import annotations

import statistics
import uuid
from datetime import UTC, date, datetime, time, timedelta
from time import monotonic
from typing import Any

import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.e2e.test_cycle_budget import runs_of
from tests.support.polling import wait_for
from tests.support.throttled import served

# Asserts timing: make test runs it alone (scripts/test-suites.sh).
pytestmark = [pytest.mark.e2e, pytest.mark.measured]

A_TOKEN, B_TOKEN = "a-" + uuid.uuid4().hex, "b-" + uuid.uuid4().hex
A = (("authorization", f"Bearer {A_TOKEN}"),)
B = (("authorization", f"Bearer {B_TOKEN}"),)
DAILIES = 2000
EVERY_SECOND = 3
BATCH = 1000
# A daily fire time half a day from now, so no day boundary moves while the module runs.
HOUR = (datetime.now(UTC).hour + 12) % 24
# Days far off that make the calendar large: by value, each publication carried them all.
FAR_DAYS = [(date(2030, 1, 1) + timedelta(days=2 * n)).isoformat() for n in range(300)]
# What one by-reference publication may weigh on the inbox: about 100 bytes and the
# tenant's and calendar's names (short here).
SMALL = 300


# The module's service (tests/e2e/conftest.py) with the two tenants' tokens.
SERVICE_ENV = {"CRONLOG_TENANT_TOKENS": f"a={A_TOKEN},b={B_TOKEN}"}


def followers(stub: pb_grpc.JobServiceStub) -> list[pb.Job]:
    """Tenant B's jobs on the calendar, every page (ListJobs cuts pages by bytes)."""
    jobs: list[pb.Job] = []
    token = ""
    while True:
        # Pages of 3 MiB (each job carries the calendar's days as applied) owe reads.
        # A lambda that binds by a default is beyond mypy (python/mypy#15459).
        page = served(lambda token=token: stub.ListJobs(pb.ListJobsRequest(  # type: ignore[misc]
            page_size=1000, page_token=token,
            labels=[pb.LabelSelector(key="fan-out", value="yes")]), timeout=30, metadata=B))
        jobs.extend(page.jobs)
        token = page.next_page_token
        if not token:
            return jobs


def inbox_end(service: RunningService) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    from cronlog.infra.kafka.client_config import consumer_config

    settings: Any = service.settings
    consumer = Consumer(consumer_config(settings, None))
    try:
        return {p: consumer.get_watermark_offsets(
            TopicPartition(settings.inbox_topic, p), timeout=10, cached=False)[1]
            for p in range(settings.partitions)}
    finally:
        consumer.close()


def publications(service: RunningService, since: dict[int, int],
                 version: int) -> list[tuple[int, dict[str, Any]]]:
    """The CalendarPublished messages of `version` on the inbox after `since`, read to each
    partition's end: (bytes, record)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from cronlog.infra.avro.codec import AvroCodec
    from cronlog.infra.kafka.client_config import consumer_config

    settings: Any = service.settings
    codec = AvroCodec()
    consumer = Consumer(consumer_config(settings, None, **{"enable.partition.eof": True}))
    found: list[tuple[int, dict[str, Any]]] = []
    left = set(since)
    deadline = monotonic() + 60
    try:
        consumer.assign([TopicPartition(settings.inbox_topic, p, o) for p, o in since.items()])
        while left:
            assert monotonic() < deadline, f"the inbox's partitions {left} not read"
            message = consumer.poll(1)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                # The end as it is now (past every commit marker): later than the update's.
                if error.code() == KafkaError._PARTITION_EOF:
                    left.discard(message.partition())
                continue
            value = message.value() or b""
            name, record = codec.decode(value)
            if name == "CalendarPublished" and record["version"] == version:
                found.append((len(value), record))
    finally:
        consumer.close()
    return found


def test_an_update_of_a_calendar_with_thousands_of_followers_reaches_them_by_reference(
        service: RunningService, stub: pb_grpc.JobServiceStub) -> None:
    canary = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=pb.JobSpec(
        name="canary", handler="echo", cron="* * * * * *")), timeout=30, metadata=A).job
    window_start = datetime.now(UTC) + timedelta(seconds=3)

    calendar = stub.CreateCalendar(pb.CreateCalendarRequest(
        request_id=rid(), name="holidays", exclusions=FAR_DAYS), timeout=30,
        metadata=B).calendar
    assert calendar.version == 1
    labels = {"fan-out": "yes"}
    specs = [pb.JobSpec(name=f"daily-{i}", handler="echo", cron=f"0 0 {HOUR} * * *",
                        time_zone="UTC", calendar="holidays", labels=labels)
             for i in range(DAILIES)]
    specs += [pb.JobSpec(name=f"second-{i}", handler="echo", cron="* * * * * *",
                         time_zone="UTC", calendar="holidays", labels=labels)
              for i in range(EVERY_SECOND)]
    job_ids: list[str] = []
    for start in range(0, len(specs), BATCH):
        results = stub.CreateJobs(pb.CreateJobsRequest(items=[
            pb.CreateJobRequest(request_id=rid(), spec=spec)
            for spec in specs[start:start + BATCH]]), timeout=120, metadata=B).results
        assert [r.WhichOneof("outcome") for r in results] == ["job"] * len(results), [
            r.error for r in results if r.WhichOneof("outcome") != "job"][:3]
        job_ids.extend(r.job.job_id for r in results)
    every_second = job_ids[DAILIES:]
    wait_for(lambda: stub.GetCalendar(pb.GetCalendarRequest(name="holidays"), timeout=30,
                                      metadata=B).calendar.jobs == len(specs),
             120, "the calendar's followers")
    wait_for(lambda: all(runs_of(stub, j, B) for j in every_second), 30,
             "the every-second followers firing")

    # The update excludes today and tomorrow (UTC): the dailies move to the day after, the
    # every-second followers stop.
    today = datetime.now(UTC).date()
    after = datetime.combine(today + timedelta(days=2), time(0), UTC)
    since = inbox_end(service)
    updated = stub.UpdateCalendar(pb.UpdateCalendarRequest(
        request_id=rid(), name="holidays", expected_version=1,
        exclusions=[*FAR_DAYS, f"{today.isoformat()}..{(today + timedelta(days=1)).isoformat()}"]),
        timeout=30, metadata=B).calendar
    assert updated.version == 2
    updated_at = datetime.now(UTC)

    def all_on_version_2() -> list[pb.Job] | None:
        jobs = followers(stub)
        return jobs if (len(jobs) == len(specs)
                        and all(j.calendar.version == 2 for j in jobs)) else None

    jobs = wait_for(all_on_version_2, 60, "every follower on version 2", interval=1.0)
    applied_at = datetime.now(UTC)
    for job in jobs:
        expected = (after.replace(hour=HOUR) if job.spec.name.startswith("daily-") else after)
        assert job.next_fire_at.ToDatetime(tzinfo=UTC) == expected, job.spec.name
        assert job.calendar.found and len(job.calendar.exclusions) == len(FAR_DAYS) + 1

    # On the inbox: one publication a follower, by reference, each a couple of hundred bytes.
    published = publications(service, since, 2)
    assert sorted(str(r["job_id"]) for _, r in published) == sorted(job_ids), (
        "one publication per follower")
    assert all(r["by_reference"] and not r["exclusions"] for _, r in published)
    sizes = [size for size, _ in published]
    assert max(sizes) <= SMALL, f"a publication of {max(sizes)} bytes"

    # The every-second followers stopped: nothing scheduled after their lookahead past the
    # moment all had applied version 2 (runs already enqueued within it still run).
    for job_id in every_second:
        late = [r for r in runs_of(stub, job_id, B)
                if r.scheduled_at.ToDatetime(tzinfo=UTC) > applied_at + timedelta(seconds=3)]
        assert not late, f"{job_id} fired on an excluded day: {late[0].scheduled_at}"

    window_end = datetime.now(UTC) + timedelta(seconds=3)
    wait_for(lambda: datetime.now(UTC) > window_end + timedelta(seconds=3), 30,
             "the canary window")
    for role, process in service.processes.items():
        assert process.poll() is None, f"{role} exited"

    # The canary: every fire time of the window ran once, p99 start lag within 2 s.
    expected_count = int((window_end - window_start).total_seconds())

    def canary_window() -> list[pb.Run] | None:
        runs = [r for r in runs_of(stub, canary.job_id, A)
                if window_start <= r.scheduled_at.ToDatetime(tzinfo=UTC) <= window_end]
        done = [r for r in runs if r.status == pb.RUN_STATUS_SUCCEEDED]
        return runs if len(done) >= expected_count else None

    runs = wait_for(canary_window, 60, "the canary's runs of the window in history")
    fire_times = [r.scheduled_at.ToDatetime(tzinfo=UTC) for r in runs]
    assert len(fire_times) == len(set(fire_times)), "a fire time ran twice"
    assert len(fire_times) >= expected_count, f"{len(fire_times)} of {expected_count}"
    lags = sorted(r.start_lag.ToTimedelta().total_seconds() for r in runs)
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    assert p99 <= 2.0, f"canary p99 start lag {p99:.2f}s (median {statistics.median(lags)})"
    print(f"\n{len(specs)} followers on version 2 {(applied_at - updated_at).total_seconds():.1f}"
          f" s after the update; publications {min(sizes)}-{max(sizes)} bytes "
          f"({sum(sizes)} in all); canary p99 {p99:.2f} s over {len(lags)} runs")
