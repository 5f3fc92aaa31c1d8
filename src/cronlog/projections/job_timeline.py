"""A job's own events -> one ClickHouse row each, worded as `cronlog audit job` prints them:
the index the console's audit timeline reads, so a page view never reads the Kafka log.

Every job event is kept but JobFireAdvanced: one per fire, it would drown the few events
people did (created, updated, paused...) and grow with the schedule, not with what happened;
the fires are the job's runs, which the run history holds. JobRequestApplied is kept as
written (the console folds it into the command's own event when one carries the same request
id; alone it is a command that changed runs only, such as a trigger)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from cronlog.domain.catalogue import JobEvent
from cronlog.projections.audit import timeline
from cronlog.projections.history import UINT64_MAX, check_time, check_unsigned, micros

NOT_IN_TIMELINE = frozenset({JobEvent.FIRE_ADVANCED})
# A row's summary is for reading on a page: the audit's details, cut to this many characters
# (a reason or an error can be long; the log keeps the whole event).
SUMMARY_CHARS = 500
REQUEST_ID_CHARS = 200


@dataclass(frozen=True)
class JobEventRow:
    """One event of a job's log, as its audit line says it: who (the actor) and what."""

    at_us: int
    tenant: str
    job_id: str
    version: int
    event_type: str
    request_id: str
    actor: str
    summary: str


class Tenanted(Protocol):
    @property
    def tenant(self) -> str: ...


class JobTimelineStore(Protocol):
    def latest_job_rows(self, job_ids: Sequence[str]) -> Mapping[str, Tenanted]: ...

    def write_job_events(self, rows: Sequence[JobEventRow]) -> None: ...


def in_timeline(name: str) -> bool:
    return name.startswith("Job") and name not in NOT_IN_TIMELINE


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def job_event_row(name: str, record: Mapping[str, Any], tenant: str) -> JobEventRow:
    entry = timeline([(name, record)])[0]
    row = JobEventRow(
        at_us=micros(record["at"]), tenant=tenant, job_id=str(UUID(str(record["job_id"]))),
        version=int(record["version"]), event_type=name,
        request_id=_cut(str(record.get("request_id") or ""), REQUEST_ID_CHARS),
        actor=_cut(entry.actor, REQUEST_ID_CHARS + 16), summary=_cut(entry.details, SUMMARY_CHARS))
    check_time("at", row.at_us)
    check_unsigned("version", row.version, UINT64_MAX)
    return row


def _own_tenant(name: str, record: Mapping[str, Any]) -> str:
    """The tenant an event names itself (its spec, or a missed range); others name none."""
    spec = record.get("spec")
    if isinstance(spec, Mapping) and spec.get("tenant"):
        return str(spec["tenant"])
    return str(record.get("tenant") or "") if name == JobEvent.FIRE_TIMES_MISSED else ""


def timeline_rows(store: JobTimelineStore, events: Iterable[tuple[str, Mapping[str, Any]]],
                  tenants: Mapping[str, str]) -> list[JobEventRow]:
    """The timeline rows of a batch of job events, checked (an event the history cannot
    hold raises UnstorableEvent before anything of the batch is written). tenants: the
    jobs' tenants the caller knows already; the others are read from the job history. An
    event of a job the history does not hold (its JobCreated was set aside, with an alert)
    gets no row: the job history refuses its lifecycle events the same way. Rows are keyed
    by (tenant, job, version, event type): a redelivered event writes the same row again,
    which collapses."""
    wanted = [(name, record) for name, record in events if in_timeline(name)]
    if not wanted:
        return []
    known = dict(tenants)
    for name, record in wanted:
        own = _own_tenant(name, record)
        if own:
            known.setdefault(str(UUID(str(record["job_id"]))), own)
    missing = sorted({str(UUID(str(r["job_id"]))) for _, r in wanted} - known.keys())
    if missing:
        known.update({job_id: row.tenant
                      for job_id, row in store.latest_job_rows(missing).items()})
    return [job_event_row(name, record, known[job_id]) for name, record in wanted
            if (job_id := str(UUID(str(record["job_id"])))) in known]
