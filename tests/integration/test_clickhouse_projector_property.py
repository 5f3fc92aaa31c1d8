"""The history projector's property against the real ClickHouse (18.16 from Debian): a few
hundred generated schema-valid events through the real adapter; every one is readable
through ClickHouseRunHistory or set aside in `rejected_events` — never both, never neither —
and the runs read back are the projection of exactly the stored events."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from typing import Any
from uuid import UUID, uuid4, uuid5

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cronlog.infra.clickhouse.rejected_events import ClickHouseRejectedEvents
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.config import Settings
from cronlog.ports import InboundMessage
from cronlog.projections.combined_history import CombinedHistoryProjector
from cronlog.projections.history import AttemptRow, HistoryProjector
from cronlog.projections.history_loop import HistoryProjectorLoop
from cronlog.projections.job_history import (
    DEPENDENCY_EVENTS,
    IGNORED,
    MISSED_RANGE,
    JobHistoryProjector,
)
from cronlog.projections.job_timeline import in_timeline
from tests.support.clickhouse_history import ClickHouseLikeHistory
from tests.support.clock import FakeClock
from tests.support.examples import examples
from tests.support.history_loop import Feed
from tests.support.history_property import (
    NOW,
    event_row_key,
    missed_key,
    no_timeline_row,
    split,
)
from tests.unit.projections.history_events_strategy import RUN_TOPIC, Event, as_read, event_log

pytestmark = pytest.mark.integration
EXAMPLES = itertools.count()
SEEN = {"events": 0, "set_aside": 0}


@pytest.fixture
def history(isolated: Settings) -> Iterator[ClickHouseRunHistory]:
    store = ClickHouseRunHistory(isolated.clickhouse_host, isolated.clickhouse_port,
                                 isolated.clickhouse_database, isolated.clickhouse_user,
                                 isolated.clickhouse_password)
    store.ensure_schema()
    ClickHouseRejectedEvents(store).ensure_schema()
    logger = logging.getLogger("cronlog.projections.history_loop")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # hundreds of set-aside events, each logged
    yield store
    logger.setLevel(level)


def own_ids(log: list[Event]) -> list[Event]:
    """The same log with ids of its own, so examples sharing one database stay apart."""
    namespace = uuid4()
    return [(name, {k: str(uuid5(namespace, str(v))) if k in ("job_id", "run_id") else v
                    for k, v in record.items()}) for name, record in log]


def newest_per_run(rows: list[AttemptRow]) -> dict[str, tuple[int, str]]:
    newest: dict[str, tuple[int, str]] = {}
    for row in rows:
        if row.run_id not in newest or newest[row.run_id][0] < row.version:
            newest[row.run_id] = (row.version, row.run_status)
    return newest


@pytest.mark.filterwarnings("ignore")
# Not shrunk: against a real server that takes minutes; the unit property shrinks the same
# generator's failures fast.
@settings(max_examples=examples(40), deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(log=event_log(min_chunks=6, max_chunks=12), cuts=st.lists(st.integers(0, 1000), max_size=2))
def test_real_history_stores_or_sets_aside_every_event(
        history: ClickHouseRunHistory, log: list[Event], cuts: list[int]) -> None:
    topic = f"example{next(EXAMPLES)}"
    messages = [m._replace(topic=f"{topic}.{m.topic}") for m in as_read(own_ids(log))]
    rejected = ClickHouseRejectedEvents(history)
    feed = Feed(split(messages, cuts))
    projector = CombinedHistoryProjector(HistoryProjector(history), JobHistoryProjector(history))
    loop = HistoryProjectorLoop(feed, projector, FakeClock(NOW), rejected, retry_delay=0.0)
    while feed.batches:
        loop.step()
    assert len(feed.committed) == len(messages)

    aside_rows = history.execute(
        f"SELECT offset, event_type FROM {history.database}.rejected_events "
        "WHERE topic LIKE %(topic)s", {"topic": f"{topic}.%"})
    aside = {int(offset) for offset, _ in aside_rows}
    assert len(aside_rows) == len(aside) == loop.set_aside
    assert {name for _, name in aside_rows} <= {m.name for m in messages}
    SEEN["events"] += len(messages)
    SEEN["set_aside"] += len(aside)

    check_run_events(history, [m for m in messages if m.topic.endswith(RUN_TOPIC)], aside)
    check_job_events(history, [m for m in messages if not m.topic.endswith(RUN_TOPIC)], aside)


def check_run_events(history: ClickHouseRunHistory, messages: list[InboundMessage],
                     aside: set[int]) -> None:
    run_ids = sorted({str(UUID(str(m.record["run_id"]))) for m in messages})
    if not run_ids:
        return
    # run_events is a ReplacingMergeTree on (job_id, run_id, version): two events of a run
    # with the same version are one row once merged, so rows are matched on that key.
    written = {(r, int(v)) for r, v in history.execute(
        f"SELECT run_id, version FROM {history.database}.run_events"
        " WHERE run_id IN %(run_ids)s", {"run_ids": tuple(run_ids)})}
    by_key: dict[tuple[str, int], list[bool]] = {}
    for m in messages:
        run_id, version, *_ = event_row_key(m.record, m.name)
        by_key.setdefault((run_id, version), []).append(m.offset in aside)
    for key, set_aside in by_key.items():
        # Events sharing a key may meet different states: one of them stored is enough.
        assert (key in written) == (not all(set_aside)), (key, set_aside)
    assert written <= set(by_key), "a run event row no generated event explains"

    reference = ClickHouseLikeHistory(validate=False)
    projection = HistoryProjector(reference)
    for m in messages:
        if m.offset not in aside:
            projection.apply_batch([(m.name, dict(m.record))])
    stored = [row for rows in history.latest_attempt_rows(run_ids).values() for row in rows]
    assert newest_per_run(stored) == newest_per_run(reference.runs)
    for run_id in newest_per_run(reference.runs):
        assert history.get_run(run_id), f"run {run_id} not readable"


def check_job_events(history: ClickHouseRunHistory, messages: list[InboundMessage],
                     aside: set[int]) -> None:
    job_ids = tuple(sorted({str(UUID(str(m.record["job_id"]))) for m in messages}))
    if not job_ids:
        return
    ranges = {(j, int(f), int(la), int(c), int(v)) for j, f, la, c, v in history.execute(
        f"SELECT job_id, first_us, last_us, count, version FROM {history.database}"
        ".missed_fire_times WHERE job_id IN %(job_ids)s", {"job_ids": job_ids})}
    missed: dict[tuple[Any, ...], list[bool]] = {}
    dependency_kept = {(str(UUID(str(m.record["job_id"]))), int(m.record["version"]), m.name)
                       for m in messages if m.name in DEPENDENCY_EVENTS and m.offset not in aside}
    for m in messages:
        job_id, version = str(UUID(str(m.record["job_id"]))), int(m.record["version"])
        if m.name in IGNORED:
            # Not history, but a line of the job's audit timeline: set aside only when that
            # line cannot be made from it.
            assert m.offset not in aside or (in_timeline(m.name) and no_timeline_row(m)), \
                m.name
        elif m.name == MISSED_RANGE:
            missed.setdefault(missed_key(m.record), []).append(m.offset in aside)
        elif m.name in DEPENDENCY_EVENTS:
            # One row per event in dependency_events, keyed by job, version and kind.
            stored = history.execute(
                f"SELECT count() FROM {history.database}.dependency_events WHERE job_id = "
                "%(job_id)s AND version = %(version)s AND event_type = %(name)s",
                {"job_id": job_id, "version": version, "name": m.name})[0][0]
            # Drawn events may be alike in job, version and kind: a row stored for one of
            # them while another is set aside is then the one not set aside.
            if m.offset in aside:
                assert not stored or (job_id, version, m.name) in dependency_kept, m
            else:
                assert stored, m
        elif m.offset not in aside:
            # Stored: a row of the job at this version, or newer (a redelivered event).
            newest = history.execute(
                f"SELECT max(version) FROM {history.database}.jobs FINAL "
                "WHERE job_id = %(job_id)s", {"job_id": job_id})[0][0]
            assert newest >= version, (m.name, version, newest)
    for key, set_aside in missed.items():
        if all(set_aside):
            assert key not in ranges, key
        else:  # stored: this range, or the same range at a newer version
            assert any(r[:2] == key[:2] and r[4] >= key[4] for r in ranges), key


def test_the_property_saw_hundreds_of_events() -> None:
    if not SEEN["events"]:
        pytest.skip("runs after the property test in the same session")
    assert SEEN["events"] >= 200 and 0 < SEEN["set_aside"] < SEEN["events"], SEEN
