"""The events a verification or a what-if reads from the Kafka log (docs/verify.md): every
job event of the partitions in scope (job events are kept forever), and the run events from
two sparse lookaheads before the window's start (offsets found by time). `cronlog verify`
reads every partition; the api's VerifyHistory and WhatIf read the partitions of the jobs
they name, within a bound of records counted before anything is read."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from cronlog.commands.api.history_proofs import HistoryNotHeld, LogTooLarge
from cronlog.domain.catalogue import JobEvent
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.kafka.event_replay import KafkaEventReplay
from cronlog.infra.kafka.log_bounds import LogBounds
from cronlog.infra.kafka.log_gaps import LogGapCheck, LogGapError, Need
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.verification.window import Window

Events = list[tuple[str, dict[str, Any]]]


def read_scope(settings: Settings, window: Window, tenant: str | None,
               job_ids: Sequence[str], partitions: Sequence[int] | None = None,
               most_records: int | None = None
               ) -> tuple[dict[str, Events], dict[str, Events]]:
    """The events of the jobs in scope (of `tenant`, of `job_ids` when given) on
    `partitions` (all when None). LogGapError when the log no longer holds them;
    LogTooLarge when more than most_records would be read (counted from the offsets, before
    reading)."""
    replay = KafkaEventReplay(settings, AvroCodec())
    kafka = list(range(settings.layout.kafka)) if partitions is None else list(partitions)
    read_from = window.since - 2 * settings.sparse_lookahead
    bounds = LogBounds(settings)
    run_starts = bounds.at([(settings.run_events_topic, p) for p in kafka], read_from)
    needs = {**{(settings.job_events_topic, p): Need(0) for p in kafka},
             **{key: Need(offset, read_from) for key, offset in run_starts.items()}}
    coverage = LogGapCheck(settings).coverage(needs)
    coverage.raise_gaps()
    if most_records is not None:
        ends = bounds.of(list(coverage.starts))
        records = sum(max(0, ends[key][1] - start) for key, start in coverage.starts.items())
        if records > most_records:
            raise LogTooLarge(most_records)
    wanted = set(job_ids)
    job_events: dict[str, Events] = defaultdict(list)
    tenants: dict[str, str] = {}
    job_starts = {k: v for k, v in coverage.starts.items() if k[0] == settings.job_events_topic}
    for _, _, batch in replay.read_many(job_starts, whole=True):
        for m in batch:
            job_id = m.record.get("job_id")
            if job_id is None or (wanted and str(job_id) not in wanted):
                continue  # a calendar's or a channel's event, or another job
            if m.name == JobEvent.CREATED:
                tenants[str(job_id)] = str(m.record["spec"]["tenant"])
            if tenant is None or tenants.get(str(job_id)) == tenant:
                job_events[str(job_id)].append((m.name, dict(m.record)))
    for events in job_events.values():
        events.sort(key=lambda e: int(e[1]["version"]))
    run_events: dict[str, Events] = defaultdict(list)
    run_starts_held = {k: v for k, v in coverage.starts.items()
                       if k[0] == settings.run_events_topic}
    for _, _, batch in replay.read_many(run_starts_held, whole=True):
        for m in batch:
            job_id = str(m.record.get("job_id"))
            if job_id in job_events:
                run_events[job_id].append((m.name, dict(m.record)))
    return job_events, run_events


class KafkaEventLogReads:
    """The api's reader for VerifyHistory and WhatIf (commands/api/history_proofs.py)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def _partitions(self, job_ids: Sequence[str]) -> list[int] | None:
        if not job_ids:
            return None
        return sorted({partition_for(j, self._settings.layout.kafka) for j in job_ids})

    def tenant_log(self, window: Window, tenant: str, job_ids: Sequence[str],
                   most_records: int) -> tuple[dict[str, Events], dict[str, Events]]:
        try:
            return read_scope(self._settings, window, tenant, job_ids,
                              self._partitions(job_ids), most_records)
        except LogGapError as exc:
            raise HistoryNotHeld(_not_held(exc)) from None

    def job_log(self, job_id: UUID, window: Window,
                most_records: int) -> tuple[Events, Events]:
        key = str(job_id)
        try:
            job_events, run_events = read_scope(self._settings, window, None, [key],
                                                self._partitions([key]), most_records)
        except LogGapError as exc:
            raise HistoryNotHeld(_not_held(exc)) from None
        return job_events.get(key, []), run_events.get(key, [])


def _not_held(error: LogGapError) -> str:
    first = "; ".join(gap.describe() for gap in error.gaps[:3])
    return f"the log no longer holds what this window needs: {first}"
