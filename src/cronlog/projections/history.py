"""Event -> ClickHouse run history: one row per attempt (latest state) and every event.

The projector folds run events into full attempt rows. It keeps the runs it has seen
recently in memory and asks the store for the latest rows of any other run, so a restart or
a redelivery produces the same rows with the same versions — the store keeps the newest.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

from cronlog.domain.catalogue import RunEvent


class UnknownRunEvent(ValueError):
    """An event the history does not know: the projection stops rather than skip it."""


class MissingRun(LookupError):
    """An event for a run whose RunScheduled the history has never seen."""


class RunCreatedTwice(ValueError):
    """A RunScheduled, RunMissed or RunSkipped for a run the history already holds, newer
    than what it holds or naming another job or tenant: a run is created once (its id is
    its job and fire time), so this is no log an owner writes. Folding it would start the
    run over without its attempts, yet the attempt rows already written cannot be taken
    back, so readers would see them or not depending on how the events were batched."""


class UnstorableEvent(ValueError):
    """An event with a value the run history's columns cannot hold: it is set aside whole,
    before anything of it is written."""


# What the history's columns hold (infra/clickhouse/schema.sql): DateTime is whole seconds
# since 1970 in a UInt32, so 1970-01-01 .. 2106-02-07 06:28:15 UTC; attempts are UInt32,
# versions and counts UInt64. Checked before any insert: ClickHouse would refuse the insert
# that holds such a value, but only after the inserts before it went in, and a run's rows
# would show an event that is then set aside.
EARLIEST_US, LATEST_US = 0, 2**32 * 1_000_000 - 1
UINT32_MAX, UINT64_MAX = 2**32 - 1, 2**64 - 1


def check_time(field: str, value_us: int) -> None:
    if not EARLIEST_US <= value_us <= LATEST_US:
        raise UnstorableEvent(f"{field} ({value_us} us since 1970) is outside what the run "
                              "history holds (1970-01-01 to 2106-02-07 UTC)")


def check_unsigned(field: str, value: int, largest: int) -> None:
    if not 0 <= value <= largest:
        raise UnstorableEvent(f"{field} {value} is outside what the run history holds "
                              f"(0 to {largest})")


def micros(value: datetime | None) -> int:
    if value is None:
        return 0
    return int(value.astimezone(UTC).timestamp() * 1_000_000)


@dataclass(frozen=True)
class AttemptRow:
    scheduled_at_us: int
    tenant: str
    job_id: str
    run_id: str
    attempt: int
    queue: str
    handler: str
    trigger: str
    max_attempts: int
    run_status: str
    attempt_status: str
    not_before_us: int = 0
    dispatched_at_us: int = 0
    started_at_us: int = 0
    finished_at_us: int = 0
    # Start lag of an attempt: started_at minus the attempt's not_before, which for the first
    # attempt is the run's scheduled time (retries are measured from their backoff's end).
    start_lag_us: int = 0
    worker: str = ""
    output: str = ""
    output_truncated: int = 0
    error: str = ""
    reason: str = ""
    version: int = 0
    # The run's place in a chain of dependent runs (issue 16), the same on all its rows.
    # logical_time: the fire time that started the chain (a run's own fire time unless it
    # is a dependency run); cascade: None outside any chain (a manual run, a backfill
    # without cascade), "" the scheduled chain, else the cascading request's id.
    logical_time_us: int = 0
    cascade: str | None = None
    upstream_run_ids: tuple[str, ...] = ()
    depth: int = 0
    # The attempt's last progress (AttemptProgressed): its handler's heartbeat details as
    # text, and when the handler gave them (0: none).
    progress: str = ""
    progress_at_us: int = 0


@dataclass(frozen=True)
class RunEventRow:
    at_us: int
    tenant: str
    job_id: str
    run_id: str
    version: int
    event_type: str
    attempt: int
    body: str


@dataclass
class _RunState:
    run: AttemptRow  # run-level fields; attempt 0
    attempts: dict[int, AttemptRow] = field(default_factory=dict)

    def rows(self) -> list[AttemptRow]:
        if not self.attempts:
            return [self.run]
        return [replace(a, run_status=self.run.run_status, reason=self.run.reason,
                        version=self.run.version) for _, a in sorted(self.attempts.items())]


class RunHistoryStore(Protocol):
    def write_attempt_rows(self, rows: Sequence[AttemptRow]) -> None: ...

    def write_run_events(self, rows: Sequence[RunEventRow]) -> None: ...

    def latest_attempt_rows(self, run_ids: Sequence[str]) -> dict[str, list[AttemptRow]]:
        """Each run's newest rows, found by its id alone (whatever job it is under); no
        rows for a run the history does not hold."""
        ...


def _id(value: Any) -> str:
    return str(value) if isinstance(value, UUID) else str(UUID(str(value)))


def _chain(record: Mapping[str, Any]) -> dict[str, Any]:
    """The chain fields of a RunScheduled (v3), RunMissed or RunSkipped (v2); records of
    earlier versions have none, and mean a run outside any dependency chain."""
    logical_time = record.get("logical_time") or record["scheduled_at"]
    cascade = record.get("cascade")
    return {"logical_time_us": micros(logical_time),
            "cascade": None if cascade is None else str(cascade),
            "upstream_run_ids": tuple(_id(u) for u in record.get("upstream_run_ids") or ()),
            "depth": int(record.get("depth") or 0)}


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


# The event as JSON for the run_events table. One encoder for every event: json.dumps with
# these arguments builds one per call, a few microseconds of every event projected; the
# encoder keeps no state between calls, so the text is the same.
_EVENT_JSON = json.JSONEncoder(default=_json_default, sort_keys=True)

KNOWN_EVENTS = frozenset(RunEvent)
# Fire times recorded as runs that do not run, and the status they get.
NOT_RUN: dict[str, str] = {RunEvent.MISSED: "missed", RunEvent.SKIPPED: "skipped"}
# Attempts that ended without a handler's result, and the status they get.
ENDED_WITHOUT_RESULT: dict[str, str] = {RunEvent.ATTEMPT_LOST: "lost",
                                        RunEvent.ATTEMPT_TIMED_OUT: "timed_out",
                                        RunEvent.ATTEMPT_CANCELLED: "cancelled"}


class HistoryProjector:
    def __init__(self, store: RunHistoryStore, cache_size: int = 100_000) -> None:
        self._store = store
        self._cache: OrderedDict[str, _RunState] = OrderedDict()
        self._cache_size = cache_size

    def apply_batch(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        for name, _ in events:
            if name not in KNOWN_EVENTS:
                raise UnknownRunEvent(f"history projection does not know {name!r}")
        self._load_missing(events)
        # The batch folds into copies of its runs, remembered only once its rows are
        # written: an event that fails here or in the store leaves no trace in the runs it
        # touched, so the rows of events stored later never show it.
        touched: dict[str, _RunState] = {}
        event_rows: list[RunEventRow] = []
        for name, record in events:
            run_id = _id(record["run_id"])
            state = self._fold(name, record, run_id, touched)
            touched[run_id] = state
            event_rows.append(RunEventRow(
                at_us=micros(record["at"]), tenant=state.run.tenant, job_id=state.run.job_id,
                run_id=run_id, version=int(record["version"]), event_type=name,
                attempt=int(record.get("attempt", 0) or 0),
                body=_EVENT_JSON.encode(dict(record))))
        rows = [row for state in touched.values() for row in state.rows()]
        _check_storable(rows, event_rows)
        if rows:
            self._store.write_attempt_rows(rows)
            self._store.write_run_events(event_rows)
        for run_id, state in touched.items():
            self._cache[run_id] = state
            self._cache.move_to_end(run_id)
        self._trim()

    def _load_missing(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        # A run created in this batch is new unless the history holds it already (a
        # redelivery, or a forged second creation, of a run this projector has not seen
        # since it started or has forgotten): folded as new, it would lose its attempts.
        # Asked by run id alone, like every other run of the batch, as the cache is: a
        # forged creation may name another job, under which a lookup by (job, run) found
        # nothing after a restart, and the event was stored as a second run of another
        # tenant where a running projector had refused it. The store finds a run by id
        # through an index (run_keys), so steady firing costs one lookup a batch.
        # Membership test per run, not set(self._cache): the cache holds 100,000 runs.
        wanted = sorted(run_id for run_id in {_id(r["run_id"]) for _, r in events}
                        if run_id not in self._cache)
        if not wanted:
            return
        for run_id, rows in self._store.latest_attempt_rows(wanted).items():
            if not rows:
                continue
            self._cache[run_id] = _from_rows(rows)

    def _known(self, run_id: str, touched: Mapping[str, _RunState]) -> _RunState | None:
        """The run as this batch has folded it so far; else a copy of what is remembered."""
        if run_id in touched:
            return touched[run_id]
        cached = self._cache.get(run_id)
        if cached is None:
            return None
        return _RunState(run=cached.run, attempts=dict(cached.attempts))

    def _fold(self, name: str, record: Mapping[str, Any], run_id: str,
              touched: Mapping[str, _RunState]) -> _RunState:
        version = int(record["version"])
        if name in NOT_RUN:
            redelivered = _redelivered(name, record, run_id, self._known(run_id, touched))
            if redelivered is not None:
                return redelivered  # redelivered: what came after it stays
            state = _RunState(run=AttemptRow(
                scheduled_at_us=micros(record["scheduled_at"]), tenant=record["tenant"],
                job_id=_id(record["job_id"]), run_id=run_id, attempt=0,
                queue=record["queue"], handler=record["handler"],
                trigger=str(record.get("trigger") or "schedule"),
                max_attempts=0, run_status=NOT_RUN[name], attempt_status="none",
                not_before_us=micros(record["scheduled_at"]), reason=str(record["reason"]),
                version=version, **_chain(record)))
            return state
        if name == RunEvent.SCHEDULED:
            redelivered = _redelivered(name, record, run_id, self._known(run_id, touched))
            if redelivered is not None:
                return redelivered  # redelivered
            state = _RunState(run=AttemptRow(
                scheduled_at_us=micros(record["scheduled_at"]), tenant=record["tenant"],
                job_id=_id(record["job_id"]), run_id=run_id, attempt=0,
                queue=record["queue"], handler=record["handler"], trigger=record["trigger"],
                max_attempts=int(record["max_attempts"]), run_status="scheduled",
                attempt_status="none", not_before_us=micros(record["not_before"]),
                version=version, **_chain(record)))
            attempt = int(record.get("attempt") or 0)
            if attempt:
                # RunScheduled v2 dispatches its first attempt in the same event.
                state.attempts[attempt] = replace(
                    state.run, attempt=attempt, attempt_status="dispatched",
                    dispatched_at_us=micros(record["at"]))
            return state
        known = self._known(run_id, touched)
        if known is None:
            raise MissingRun(f"{name} v{version} for run {run_id} without its RunScheduled")
        state = known
        if version <= state.run.version:
            return state  # already folded: a redelivery
        state.run = replace(state.run, version=version)
        attempt = int(record.get("attempt", 0) or 0)
        row = state.attempts.get(attempt)
        if name == RunEvent.ATTEMPT_DISPATCHED:
            state.attempts[attempt] = replace(
                state.run, attempt=attempt, attempt_status="dispatched",
                not_before_us=micros(record["not_before"]), dispatched_at_us=micros(record["at"]))
            state.run = replace(state.run, run_status="scheduled")
        elif name == RunEvent.ATTEMPT_WAITING:
            # Recorded when decided; dispatched (AttemptDispatched) once within the lookahead.
            state.attempts[attempt] = replace(
                state.run, attempt=attempt, attempt_status="waiting",
                not_before_us=micros(record["not_before"]))
            state.run = replace(state.run, run_status="scheduled")
        elif name == RunEvent.ATTEMPT_STARTED:
            if row is None:
                raise MissingRun(f"AttemptStarted for undispatched attempt {attempt} of {run_id}")
            started = micros(record["started_at"])
            state.attempts[attempt] = replace(
                row, attempt_status="running", started_at_us=started,
                start_lag_us=started - row.not_before_us, worker=record["worker"])
            state.run = replace(state.run, run_status="running")
        elif name in (RunEvent.ATTEMPT_SUCCEEDED, RunEvent.ATTEMPT_FAILED):
            if row is None:
                raise MissingRun(f"{name} for undispatched attempt {attempt} of {run_id}")
            output = bytes(record.get("output") or b"").decode("utf-8", errors="replace")
            if record.get("started_at") is not None:
                # AttemptSucceeded v2: its start reported with its end, no AttemptStarted.
                started = micros(record["started_at"])
                row = replace(row, started_at_us=started,
                              start_lag_us=started - row.not_before_us)
            state.attempts[attempt] = replace(
                row, attempt_status="succeeded" if name == RunEvent.ATTEMPT_SUCCEEDED else "failed",
                finished_at_us=micros(record["finished_at"]), worker=record["worker"],
                output=output, output_truncated=int(bool(record["output_truncated"])),
                error=str(record.get("error") or ""))
            if name == RunEvent.ATTEMPT_SUCCEEDED:
                # A succeeded attempt ends its run (older logs add RunSucceeded after it).
                state.run = replace(state.run, run_status="succeeded")
        elif name == RunEvent.ATTEMPT_PROGRESSED:
            if row is None:
                raise MissingRun(f"{name} for undispatched attempt {attempt} of {run_id}")
            state.attempts[attempt] = replace(
                row, progress=bytes(record["details"]).decode("utf-8", errors="replace"),
                progress_at_us=micros(record["progressed_at"]))
        elif name in ENDED_WITHOUT_RESULT:
            if row is None:
                raise MissingRun(f"{name} for undispatched attempt {attempt} of {run_id}")
            status = ENDED_WITHOUT_RESULT[name]
            state.attempts[attempt] = replace(
                row, attempt_status=status, finished_at_us=micros(record["at"]),
                error=str(record.get("reason") or status))
        elif name == RunEvent.SUCCEEDED:
            state.run = replace(state.run, run_status="succeeded")
        elif name == RunEvent.FAILED:
            state.run = replace(state.run, run_status="dead_lettered",
                                reason=str(record["reason"]))
        elif name == RunEvent.CANCELLED:
            state.run = replace(state.run, run_status="cancelled", reason=str(record["reason"]))
        elif name == RunEvent.REDRIVEN:
            # A new series of attempts follows (AttemptDispatched): no longer a dead letter.
            state.run = replace(state.run, run_status="scheduled", reason="")
        return state

    def _trim(self) -> None:
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)


def _redelivered(name: str, record: Mapping[str, Any], run_id: str,
                 existing: _RunState | None) -> _RunState | None:
    """The run, unchanged, when the creation event `name` is a redelivery (of the run's
    job and tenant, the run at its version or newer); None when it starts a new run. Any
    other creation of a run the history holds raises RunCreatedTwice."""
    if existing is None:
        return None
    version = int(record["version"])
    held = existing.run
    # A redelivery is the same record. One naming another job or tenant is no creation of
    # this run whatever its version (and its chain fields): folded as a redelivery by a
    # running projector and as a new run by a restarted one, the two would disagree.
    job_id, tenant = _id(record["job_id"]), str(record["tenant"])
    if (job_id, tenant) != (held.job_id, held.tenant):
        raise RunCreatedTwice(f"{name} v{version} for run {run_id} of job {job_id} (tenant "
                              f"{tenant!r}), which the history already holds for job "
                              f"{held.job_id} (tenant {held.tenant!r}): a run is created once")
    if held.version >= version:
        return existing
    raise RunCreatedTwice(f"{name} v{version} for run {run_id}, which the history already "
                          f"holds at v{held.version}: a run is created once")


def _from_rows(rows: Sequence[AttemptRow]) -> _RunState:
    """A run as its stored rows show it. Each write rewrites all of a run's attempts with
    its version, and a run never loses an attempt (RunCreatedTwice), so the newest
    version's rows are its attempts; an older row is the attempt-0 row of the run before
    its first attempt. Each row carries the run's own fields; the attempt's fields are not
    the run's, and a later attempt must not inherit them."""
    newest = max(rows, key=lambda r: (r.version, r.attempt))
    current = sorted((r for r in rows if r.version == newest.version and r.attempt > 0),
                     key=lambda r: r.attempt)
    if not current:
        return _RunState(run=newest)
    run = replace(newest, attempt=0, attempt_status="none",
                  not_before_us=current[0].not_before_us, dispatched_at_us=0,
                  started_at_us=0, finished_at_us=0, start_lag_us=0, worker="", output="",
                  output_truncated=0, error="", progress="", progress_at_us=0)
    return _RunState(run=run, attempts={r.attempt: r for r in current})


def _check_storable(rows: Sequence[AttemptRow], events: Sequence[RunEventRow]) -> None:
    for row in rows:
        check_time("scheduled_at", row.scheduled_at_us)
        check_unsigned("attempt", row.attempt, UINT32_MAX)
        check_unsigned("max_attempts", row.max_attempts, UINT32_MAX)
        check_unsigned("version", row.version, UINT64_MAX)
        check_time("logical_time", row.logical_time_us)
        check_unsigned("depth", row.depth, UINT32_MAX)
        check_time("progress_at", row.progress_at_us)
    for event in events:
        check_time("at", event.at_us)
        check_unsigned("version", event.version, UINT64_MAX)
        check_unsigned("attempt", event.attempt, UINT32_MAX)
