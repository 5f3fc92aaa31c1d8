"""The ClickHouse history projected from the log into a database of its own: what `cronlog
replay` compares with the live history, and what `cronlog replay --rebuild` puts in its
place.

Projected as the history projector does it (events ClickHouse will not take are set aside
in the database's rejected_events), then cut to the horizon by the same retention. Where
retention has trimmed a run events partition before the horizon, the events of runs whose
first event is gone are skipped: those runs are older than anything the history keeps.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from cronlog.domain.catalogue import RunEvent
from cronlog.infra.clickhouse.history_swap import swap_in
from cronlog.infra.clickhouse.rejected_events import ClickHouseRejectedEvents
from cronlog.infra.clickhouse.retention import HistoryRetention
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.clickhouse.tenant_copies import resync_after_swap
from cronlog.infra.composition import build_event_replay, build_run_history
from cronlog.infra.config import Settings
from cronlog.infra.kafka.log_bounds import LogBounds, TopicPartitionKey
from cronlog.infra.system_clock import SystemClock
from cronlog.ports import InboundMessage
from cronlog.projections.combined_history import CombinedHistoryProjector
from cronlog.projections.history import NOT_RUN, HistoryProjector
from cronlog.projections.history_loop import HistoryProjectorLoop
from cronlog.projections.job_history import JobHistoryProjector

CREATES_RUN = frozenset({RunEvent.SCHEDULED, *NOT_RUN})
RUNS_AND_JOBS = ("SELECT (SELECT uniqExact(run_id) FROM {db}.runs), "
                 "(SELECT uniqExact(job_id) FROM {db}.jobs)")


@dataclass
class Projected:
    events: int = 0
    # Events of runs whose first event retention removed (before the horizon).
    skipped: int = 0
    set_aside: int = 0


class _LogBatches:
    """The history loop's feed, over batches read from the log once."""

    def __init__(self, batches: Iterator[list[InboundMessage]]) -> None:
        self._batches = batches
        self.finished = False

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        batch = next(self._batches, None)
        if batch is None:
            self.finished = True
            return []
        return batch

    def commit(self, applied: Sequence[InboundMessage]) -> None:
        """Nothing to commit: a replay reads without a consumer group."""

    def close(self) -> None:
        """Nothing to close: the batches' reader closes itself when read to its end."""


class HistoryProjection:
    def __init__(self, settings: Settings, store: ClickHouseRunHistory) -> None:
        self._settings = settings
        self._store = store
        self._replay = build_event_replay(settings)
        self.counts = Projected()

    def project(self, starts: dict[TopicPartitionKey, int], skip_runs_begun_before: bool) -> None:
        """Projects both event topics from `starts` (offset 0 where not given) to their
        end as of now. Raises LogGapError if the log no longer holds a start."""
        rejected = ClickHouseRejectedEvents(self._store)
        rejected.ensure_schema()
        projector = CombinedHistoryProjector(HistoryProjector(self._store),
                                             JobHistoryProjector(self._store))
        feed = _LogBatches(self._batches(starts, skip_runs_begun_before))
        loop = HistoryProjectorLoop(feed, projector, SystemClock(), rejected)
        while not feed.finished:
            loop.step()
        self.counts.set_aside += loop.set_aside

    def _batches(self, starts: dict[TopicPartitionKey, int],
                 skip_runs_begun_before: bool) -> Iterator[list[InboundMessage]]:
        s = self._settings
        # Jobs first, as the live projector has them before their runs.
        job_starts = {(s.job_events_topic, p): starts.get((s.job_events_topic, p), 0)
                      for p in range(s.layout.kafka)}
        for _, _, batch in self._replay.read_many(job_starts, whole=True):
            self.counts.events += len(batch)
            yield batch
        # One partition at a time: a run's events all live in its job's partition, so what
        # the skipping remembers is one partition's runs.
        for partition in range(s.layout.kafka):
            start = starts.get((s.run_events_topic, partition), 0)
            yield from self._run_events(partition, start, skip_runs_begun_before and start > 0)

    def _run_events(self, partition: int, start: int,
                    trimmed: bool) -> Iterator[list[InboundMessage]]:
        created: set[str] = set()
        for batch in self._replay.read(self._settings.run_events_topic, partition, start,
                                       whole=True):
            if trimmed:
                kept = []
                for m in batch:
                    run_id = str(m.record.get("run_id"))
                    if m.name in CREATES_RUN:
                        created.add(run_id)
                    if run_id in created:
                        kept.append(m)
                self.counts.skipped += len(batch) - len(kept)
                batch = kept
            self.counts.events += len(batch)
            if batch:
                yield batch


def project_history(settings: Settings, database: str, starts: dict[TopicPartitionKey, int],
                    now: datetime) -> tuple[ClickHouseRunHistory, Projected]:
    """The history of the log from `starts` in a new database, cut to the horizon."""
    store = build_run_history(settings, database)
    store.ensure_schema()
    projection = HistoryProjection(settings, store)
    projection.project(starts, skip_runs_begun_before=True)
    HistoryRetention(store, settings.history_retention).run(now)
    return store, projection.counts


def rebuild_history(settings: Settings, starts: dict[TopicPartitionKey, int],
                    now: datetime) -> list[str]:
    """Builds the history from the log into a new database, puts its tables in place of
    the live ones (which are kept in another new database), then projects into them what
    was committed meanwhile. Returns what it did, a line each."""
    tag = uuid.uuid4().hex[:8]
    live_db = settings.clickhouse_database
    rebuilt_db, replaced_db = f"{live_db}_rebuild_{tag}", f"{live_db}_replaced_{tag}"
    s = settings
    keys = [(t, p) for t in (s.job_events_topic, s.run_events_topic) for p in range(s.layout.kafka)]
    # Where the rebuild's reading ends at the latest: the live projector's writes to the
    # old tables past these are projected again into the new ones after the swap.
    ends = {key: high for key, (_, high) in LogBounds(settings).of(keys).items()}
    rebuilt, counts = project_history(settings, rebuilt_db, starts, now)
    runs, jobs = rebuilt.execute(RUNS_AND_JOBS.format(db=rebuilt_db))[0]
    live = build_run_history(settings)
    live.ensure_schema()
    replaced = swap_in(live, rebuilt_db, replaced_db)
    # The analysts' copies follow the new tables: made again from them, their feeds reading
    # them (the tail below then reaches the copies through the feeds).
    tenants = resync_after_swap(live)
    tail = HistoryProjection(settings, live)
    tail.project(ends, skip_runs_begun_before=False)
    return [
        f"history rebuilt from the log: {runs} runs, {jobs} jobs from {counts.events} events "
        f"({counts.skipped} of runs begun before the log's first offset held skipped, "
        f"{counts.set_aside} set aside in rejected_events)",
        f"then {tail.counts.events} events committed meanwhile projected into it",
        f"the replaced tables ({', '.join(replaced) or 'none'}) are kept in database "
        f"{replaced_db}: DROP DATABASE {replaced_db} once satisfied",
        *([f"the analysts' copies of tenants {', '.join(tenants)} made again from it"]
          if tenants else []),
    ]
