"""The channel part of the Postgres projection against a real PostgreSQL and Kafka (issue
37): the channels table written from ChannelCreated/Updated/SecretRotated/Deleted, never
taken back by a replayed older event, read back by the owner as the aggregate and by the
api scoped to its tenant with stable pages; and rebuilt from the log by a new owner's
catch-up and by `replay`'s rebuild, which finds it equal to the live table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from confluent_kafka import Producer

from cronlog.domain.channel import Channel, channel_id
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.infra.composition import build_history_projector
from cronlog.infra.config import Settings
from cronlog.infra.entrypoints.replay import rebuild_postgres
from cronlog.infra.kafka.client_config import producer_config
from cronlog.infra.kafka.event_replay import KafkaEventReplay
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.infra.owner_adapters import OwnerLogReplay, OwnerStoreAdapter
from cronlog.infra.postgres.channel_reads import PostgresChannelReads
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from tests.support.logged_events import Logged, record
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
HOOK = "https://hooks.example.com/cronlog"


def channel_logged(channel: Channel, first_offset: int) -> list[Logged]:
    """A channel's pending events, as the job-events topic holds them."""
    return [record(*event_to_record(e), first_offset + i)
            for i, e in enumerate(channel.collect_events())]


def channel_row(dsn: str, tenant: str, name: str) -> tuple[Any, ...] | None:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT version, kind, target, recipients, description, is_default, "
            "secret_rotation, deleted, partition FROM channels WHERE tenant = %s AND "
            "name = %s", (tenant, name)).fetchone()


def test_channels_are_projected_and_never_go_back(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    store = OwnerStoreAdapter(state, AvroCodec())
    claim = state.take_epoch(1, "o")
    channel = Channel.create("t", "ops", "webhook", HOOK, (), "on call", True, "c1", T0)
    created = channel_logged(channel, 0)
    state.apply(1, claim.epoch, created, [])
    assert channel_row(isolated.postgres_dsn, "t", "ops") == (
        1, "webhook", HOOK, [], "on call", True, 0, False, 1)
    channel.update(HOOK + "/v2", (), "", False, "u1", T0, expected_version=1)
    channel.rotate_secret("r1", T0)
    changed = channel_logged(channel, 1)
    state.apply(1, claim.epoch, changed, [])
    # A catch-up applying the older events again leaves the newer version.
    state.apply(1, claim.epoch, [*created, *changed[:1]], [])
    assert channel_row(isolated.postgres_dsn, "t", "ops") == (
        3, "webhook", HOOK + "/v2", [], "", False, 1, False, 1)
    loaded = store.channel(channel.id)
    assert loaded is not None and loaded.version == 3 and loaded.secret_rotation == 1
    assert (loaded.tenant, loaded.name, loaded.kind, loaded.deleted) == (
        "t", "ops", "webhook", False)
    channel.delete("d1", T0)
    state.apply(1, claim.epoch, channel_logged(channel, 3), [])
    row = channel_row(isolated.postgres_dsn, "t", "ops")
    assert row is not None and row[0] == 4 and row[7] is True and row[5] is False
    deleted = store.channel(channel.id)
    assert deleted is not None and deleted.deleted
    assert store.channel(channel_id("t", "missing")) is None
    deleted.recreate("email", "", ("a@b.example",), "mail", False, "c2", T0)
    state.apply(1, claim.epoch, channel_logged(deleted, 4), [])
    assert channel_row(isolated.postgres_dsn, "t", "ops") == (
        5, "email", "", ["a@b.example"], "mail", False, 2, False, 1)


def test_the_api_reads_one_tenants_channels_in_stable_pages(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    claim = state.take_epoch(0, "o")
    events: list[Logged] = []
    for tenant, names in (("t", ("a", "b", "c", "gone")), ("u", ("a",))):
        for name in names:
            channel = Channel.create(tenant, name, "email", "", ("x@y.example",), "", False,
                                     "c-" + name, T0)
            if name == "gone":
                channel.delete("d", T0)
            events.extend(channel_logged(channel, len(events)))
    state.apply(0, claim.epoch, events, [])
    reads = PostgresChannelReads(isolated.postgres_dsn)
    try:
        assert reads.count_channels("t") == 3 and reads.count_channels("u") == 1
        first, token = reads.channels("t", 2, None)
        assert [v.name for v in first] == ["a", "b"] and token
        rest, end = reads.channels("t", 2, token)
        assert [v.name for v in rest] == ["c"] and end is None
        mine = reads.channel("t", "a")
        assert mine is not None and mine.recipients == ("x@y.example",)
        assert mine.channel_id == channel_id("t", "a") != reads.channel("u", "a").channel_id  # type: ignore[union-attr]
        gone = reads.channel("t", "gone")
        assert gone is not None and gone.deleted
        assert reads.channel("v", "a") is None and reads.channels("v", 10, None) == ([], None)
    finally:
        reads.close()


def test_the_channels_table_is_rebuilt_from_the_log(isolated: Settings) -> None:
    settings = isolated
    ensure_core_topics(settings)
    codec = AvroCodec()
    producer = Producer(producer_config(settings))
    for n, kind in enumerate(("webhook", "email", "webhook")):
        tenant = f"tenant-{n}"
        channel = Channel.create(tenant, "ops", kind, HOOK if kind == "webhook" else "",
                                 () if kind == "webhook" else ("a@b.example",), "", n == 0,
                                 f"c{n}", T0)
        if n == 0:
            channel.rotate_secret("r", T0)
        if n == 2:
            channel.delete("d", T0)
        if n == 1:
            channel.delete("d", T0)
            channel.recreate("webhook", HOOK, (), "", True, "c", T0)
        for event in channel.collect_events():
            name, fields = event_to_record(event)
            producer.produce(settings.job_events_topic, key=str(channel.id).encode(),
                             value=codec.encode(name, fields),
                             partition=partition_for(str(channel.id), settings.partitions))
    assert producer.flush(30) == 0
    # A new owner catching up writes the live table.
    state = PostgresOwnerState(settings.postgres_dsn)
    store = OwnerStoreAdapter(state, codec)
    catch_up = OwnerLogReplay(KafkaEventReplay(settings, codec), state, settings).start(
        store.take_epochs(list(range(settings.partitions)), "test-owner"))
    wait_for(lambda: catch_up.advance(0.2) is not None and catch_up.finished, 30,
             "the owner's catch-up")
    state.close()
    assert channel_row(settings.postgres_dsn, "tenant-0", "ops")[6] == 1  # type: ignore[index]
    assert channel_row(settings.postgres_dsn, "tenant-2", "ops")[7] is True  # type: ignore[index]
    # The history projector skips them: nothing of a channel is a job's history.
    loop = build_history_projector(settings)
    try:
        for _ in range(3):
            loop.step()
    finally:
        loop.stop()
        loop.run_forever()
    # Replay's rebuild reads the log into a fresh schema and compares it with the live one.
    schema = "rebuild_" + uuid4().hex[:8]
    try:
        comparisons = rebuild_postgres(settings, schema)
    finally:
        drop_copies_of(settings, schema)
    [channels] = [c for c in comparisons if c.what == "postgres channels"]
    assert (channels.rebuilt, channels.live, channels.mismatches) == (3, 3, [])


def drop_copies_of(settings: Settings, schema: str) -> None:
    with psycopg.connect(settings.postgres_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
