"""PostgresOwnerState with 16 logical partitions over 4 Kafka partitions (issue 34), against
a real PostgreSQL: rows land on their logical partition, the Kafka partition's offsets on
its anchor's row, and a take of the Kafka partition fences a zombie's apply by the anchor's
epoch (invariant 2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

import psycopg
import pytest

from cronlog.commands.owner.ports import DueWindow, PartitionEvents, Produced
from cronlog.domain.partition_layout import PartitionLayout
from cronlog.infra.config import Settings
from cronlog.infra.postgres.connection import ensure_schema
from cronlog.infra.postgres.owner_state import PostgresOwnerState, StaleEpoch
from cronlog.projections.state import LoggedEvent
from tests.support.clock import T0
from tests.support.logged_events import Logged, a_job, logged

pytestmark = pytest.mark.integration
LAYOUT = PartitionLayout(16, 4)


@dataclass(frozen=True)
class KeyedLogged:
    """A logged event with its record key, as consumed from Kafka."""

    offset: int
    name: str
    record: dict[str, Any]
    raw: bytes
    key: str


def keyed(events: list[Logged], key: str) -> list[KeyedLogged]:
    return [KeyedLogged(e.offset, e.name, e.record, e.raw, key) for e in events]


def partition_events(partition: int, epoch: int, job_events: Sequence[LoggedEvent],
                     run_events: Sequence[LoggedEvent]) -> PartitionEvents:
    """PartitionEvents of logged events: it is typed for the messages an owner produced, of
    which PostgresOwnerState reads only what every LoggedEvent has."""
    return PartitionEvents(partition, epoch, cast(Sequence[Produced], job_events),
                           cast(Sequence[Produced], run_events))


def test_rows_land_on_logical_partitions_and_the_anchor_fences_the_kafka_partition(
        isolated: Settings) -> None:
    ensure_schema(isolated.postgres_dsn, LAYOUT.logical)
    state = PostgresOwnerState(isolated.postgres_dsn, LAYOUT)
    job = a_job()
    while LAYOUT.logical_of(str(job.id)) < LAYOUT.kafka:
        job = a_job()  # one whose logical partition is not its Kafka partition's number
    logical = LAYOUT.logical_of(str(job.id))
    kafka = LAYOUT.kafka_of(logical)
    run = job.fire(T0)
    logged_jobs, logged_runs = logged([*job.collect_events(), *run.collect_events()],
                                      first_offset=5)
    jobs, runs = keyed(logged_jobs, str(job.id)), keyed(logged_runs, str(job.id))

    old = {c.partition: c for c in state.take_epochs(list(LAYOUT.logicals_of(kafka)), "old")}
    state.apply_all([partition_events(kafka, old[kafka].epoch, jobs, runs)])
    row = state.job(job.id)
    assert row is not None and row.partition == logical
    assert [r.partition for r in state.in_flight_runs([logical])] == [logical]
    window = DueWindow.plain(T0 + timedelta(hours=1))
    assert [r.job_id for r in state.due_jobs([logical], window, 10)] == \
        [r.job_id for r in state.due_jobs(LAYOUT.logicals_of(kafka), window, 10)]
    with psycopg.connect(isolated.postgres_dsn) as conn:
        offsets: dict[int, int] = dict(conn.execute(
            "SELECT partition, job_events_offset FROM partition_owners "
            "WHERE partition = ANY(%s)", (list(LAYOUT.logicals_of(kafka)),)).fetchall())
    assert offsets[kafka] == max(e.offset for e in jobs) + 1, "the anchor's row"
    assert all(offsets[p] == 0 for p in LAYOUT.logicals_of(kafka) if p != kafka)

    # A new owner takes the Kafka partition: every logical partition at a new epoch; the
    # old owner's next apply is refused by the anchor's epoch, whichever rows it touches.
    new = {c.partition: c for c in state.take_epochs(list(LAYOUT.logicals_of(kafka)), "new")}
    assert all(new[p].epoch == old[p].epoch + 1 for p in new)
    assert new[kafka].job_events_offset == max(e.offset for e in jobs) + 1
    later = job.fire(T0 + timedelta(seconds=5))
    _, more = logged(list(later.collect_events()), first_offset=50)
    with pytest.raises(StaleEpoch):
        state.apply_all([partition_events(kafka, old[kafka].epoch, [], keyed(more, str(job.id)))])
    with pytest.raises(StaleEpoch):
        state.apply(kafka, old[kafka].epoch, [], keyed(more, str(job.id)))
    state.apply(kafka, new[kafka].epoch, [], keyed(more, str(job.id)))
