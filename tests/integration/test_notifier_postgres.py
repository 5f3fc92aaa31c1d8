"""The notifier's state and its view of the channels against a real PostgreSQL (issue 37):
deliveries kept once however often their alert is read, loaded back by partition earliest
due first, moved on by each attempt; which jobs are failing; ended deliveries pruned; and
the tenants' live channels with each webhook's secret derived."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.domain.channel import Channel, ChannelKind
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.infra.config import Settings
from cronlog.infra.notifier.postgres_deliveries import (
    KEEP_ENDED,
    PostgresChannelDirectory,
    PostgresDeliveries,
)
from cronlog.infra.owner_adapters import OwnerStoreAdapter
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from cronlog.notifications.model import AttemptOutcome, TenantAlert
from cronlog.notifications.signing import derive_channel_secret
from tests.support.logged_events import record
from tests.support.notifications import alert, delivery

pytestmark = pytest.mark.integration
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
S = timedelta(seconds=1)
KEY = b"k" * 32


def test_deliveries_are_kept_once_loaded_by_partition_and_moved_on(isolated: Settings) -> None:
    dsn = isolated.postgres_dsn
    PostgresDeliveries.ensure_schema(dsn)
    PostgresDeliveries.ensure_schema(dsn)  # again, as a second notifier starting would
    store = PostgresDeliveries(dsn)
    try:
        late, early = delivery("acme", 1, due_at=T0 + 5 * S), delivery("acme", 2, due_at=T0)
        other = delivery("beta", 3, due_at=T0)
        assert store.add(0, [late, early]) == {late.delivery_id, early.delivery_id}
        store.add(1, [other])
        assert store.add(0, [late]) == set()  # its alert read again
        assert [(p, d.delivery_id) for p, d in store.pending([0], 10)] == [
            (0, early.delivery_id), (0, late.delivery_id)]
        [(_, read)] = store.pending([1], 10)
        assert read == other
        assert [d for _, d in store.pending([0, 1], 1)] == [early]
        tenant_alert = alert("acme", kind=TenantAlert.QUEUE_UNSERVED, n=9,
                             run_id=None, attempt=None, digest_count=4)
        kept = delivery("acme", 9)
        kept = type(kept)(kept.delivery_id, kept.channel_id, tenant_alert, kept.due_at)
        store.add(2, [kept])
        assert [d for _, d in store.pending([2], 10)] == [kept]

        started = type(early)(early.delivery_id, early.channel_id, early.alert, early.due_at,
                              1, T0)
        store.attempted(started, AttemptOutcome.RETRYING, T0 + 7 * S)
        [(_, first_due), (_, again)] = store.pending([0], 10)
        assert first_due.delivery_id == late.delivery_id  # due at 5 s, the retry at 7 s
        assert (again.attempt, again.due_at, again.first_at) == (2, T0 + 7 * S, T0)
        store.attempted(again, AttemptOutcome.DELIVERED, None)
        store.attempted(late, AttemptOutcome.FAILED, None)
        assert store.pending([0], 10) == []
        store.prune(datetime.now(UTC) + KEEP_ENDED + S)
        assert [d for _, d in store.pending([1], 10)] == [other]
    finally:
        store.close()


def test_a_job_is_failing_from_its_dead_letter_to_its_next_success(isolated: Settings) -> None:
    PostgresDeliveries.ensure_schema(isolated.postgres_dsn)
    store = PostgresDeliveries(isolated.postgres_dsn)
    try:
        job = uuid4()
        assert store.set_failing(job, False, T0) is False
        assert store.set_failing(job, True, T0) is False
        assert store.set_failing(job, True, T0 + S) is True
        assert store.set_failing(job, False, T0 + 2 * S) is True
        assert store.set_failing(job, False, T0 + 3 * S) is False
    finally:
        store.close()


def test_the_directory_has_each_tenants_live_channels_with_their_secrets(
        isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    OwnerStoreAdapter(state, AvroCodec())
    claim = state.take_epoch(1, "o")
    hook = Channel.create("acme", "ops", "webhook", "https://hooks.example.com/x", (), "",
                          True, "c1", T0)
    mail = Channel.create("acme", "mail", "email", "", ("ops@example.com",), "", False,
                          "c2", T0)
    gone = Channel.create("acme", "old", "slack", "https://hooks.slack.com/services/x", (),
                          "", True, "c3", T0)
    gone.delete("c4", T0 + S)
    theirs = Channel.create("beta", "ops", "webhook", "https://hooks.example.com/y", (), "",
                            True, "c5", T0)
    offset = 0
    for channel in (hook, mail, gone, theirs):
        events = [record(*event_to_record(e), offset + i)
                  for i, e in enumerate(channel.collect_events())]
        offset += len(events)
        state.apply(1, claim.epoch, events, [])
    directory = PostgresChannelDirectory(isolated.postgres_dsn, KEY)
    try:
        named = directory.named("acme", ["ops", "mail", "old", "missing"])
        assert sorted(named) == ["mail", "ops"]
        assert named["ops"].target.signing_secrets == (derive_channel_secret(KEY, hook.id, 0),)
        assert named["mail"].target.kind is ChannelKind.EMAIL
        assert named["mail"].target.recipients == ("ops@example.com",)
        assert named["mail"].target.signing_secrets == ()
        assert [e.name for e in directory.defaults("acme")] == ["ops"]
        assert [e.target.tenant for e in directory.defaults("beta")] == ["beta"]
        deleted = directory.by_id(gone.id)
        assert deleted is not None and deleted.deleted and deleted.name == "old"
        assert directory.by_id(uuid4()) is None
        found = directory.by_id(theirs.id)
        assert found is not None and found.target.tenant == "beta"
        unkeyed = PostgresChannelDirectory(isolated.postgres_dsn, None)
        try:
            assert unkeyed.named("acme", ["ops"])["ops"].target.signing_secrets == ()
        finally:
            unkeyed.close()
    finally:
        directory.close()
