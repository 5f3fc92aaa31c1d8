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


class UnknownRunEvent(ValueError):
    """An event the history does not know: the projection stops rather than skip it."""


class MissingRun(LookupError):
    """An event for a run whose RunScheduled the history has never seen."""


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

    def latest_attempt_rows(self, run_ids: Sequence[str]) -> dict[str, list[AttemptRow]]: ...


def _id(value: Any) -> str:
    return str(value) if isinstance(value, UUID) else str(UUID(str(value)))


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


KNOWN_EVENTS = frozenset({"RunScheduled", "RunMissed", "RunSkipped", "AttemptDispatched",
                          "AttemptStarted", "AttemptSucceeded", "AttemptFailed", "AttemptLost",
                          "AttemptTimedOut", "AttemptCancelled", "RunSucceeded", "RunFailed",
                          "RunCancelled"})
# Fire times recorded as runs that do not run, and the status they get.
NOT_RUN = {"RunMissed": "missed", "RunSkipped": "skipped"}


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
        touched: dict[str, _RunState] = {}
        event_rows: list[RunEventRow] = []
        for name, record in events:
            run_id = _id(record["run_id"])
            state = self._fold(name, record, run_id)
            touched[run_id] = state
            event_rows.append(RunEventRow(
                at_us=micros(record["at"]), tenant=state.run.tenant, job_id=state.run.job_id,
                run_id=run_id, version=int(record["version"]), event_type=name,
                attempt=int(record.get("attempt", 0) or 0),
                body=json.dumps(dict(record), default=_json_default, sort_keys=True)))
        rows = [row for state in touched.values() for row in state.rows()]
        if rows:
            self._store.write_attempt_rows(rows)
            self._store.write_run_events(event_rows)
        self._trim()

    def _load_missing(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        scheduled = {_id(r["run_id"]) for n, r in events
                     if n == "RunScheduled" or n in NOT_RUN}
        # Membership test per run, not set(self._cache): the cache holds 100,000 runs.
        wanted = sorted(run_id for run_id in {_id(r["run_id"]) for _, r in events} - scheduled
                        if run_id not in self._cache)
        if not wanted:
            return
        for run_id, rows in self._store.latest_attempt_rows(wanted).items():
            if not rows:
                continue
            ordered = sorted(rows, key=lambda r: r.attempt)
            state = _RunState(run=replace(ordered[-1], attempt=0))
            state.attempts = {r.attempt: r for r in ordered if r.attempt > 0}
            self._cache[run_id] = state

    def _fold(self, name: str, record: Mapping[str, Any], run_id: str) -> _RunState:
        version = int(record["version"])
        if name in NOT_RUN:
            state = _RunState(run=AttemptRow(
                scheduled_at_us=micros(record["scheduled_at"]), tenant=record["tenant"],
                job_id=_id(record["job_id"]), run_id=run_id, attempt=0,
                queue=record["queue"], handler=record["handler"], trigger="schedule",
                max_attempts=0, run_status=NOT_RUN[name], attempt_status="none",
                not_before_us=micros(record["scheduled_at"]), reason=str(record["reason"]),
                version=version))
            self._cache[run_id] = state
            return state
        if name == "RunScheduled":
            existing = self._cache.get(run_id)
            if existing is not None and existing.run.version >= version:
                return existing  # redelivered
            state = _RunState(run=AttemptRow(
                scheduled_at_us=micros(record["scheduled_at"]), tenant=record["tenant"],
                job_id=_id(record["job_id"]), run_id=run_id, attempt=0,
                queue=record["queue"], handler=record["handler"], trigger=record["trigger"],
                max_attempts=int(record["max_attempts"]), run_status="scheduled",
                attempt_status="none", not_before_us=micros(record["not_before"]),
                version=version))
            attempt = int(record.get("attempt") or 0)
            if attempt:
                # RunScheduled v2 dispatches its first attempt in the same event.
                state.attempts[attempt] = replace(
                    state.run, attempt=attempt, attempt_status="dispatched",
                    dispatched_at_us=micros(record["at"]))
            self._cache[run_id] = state
            return state
        cached = self._cache.get(run_id)
        if cached is None:
            raise MissingRun(f"{name} v{version} for run {run_id} without its RunScheduled")
        state = cached
        self._cache.move_to_end(run_id)
        if version <= state.run.version:
            return state  # already folded: a redelivery
        state.run = replace(state.run, version=version)
        attempt = int(record.get("attempt", 0) or 0)
        row = state.attempts.get(attempt)
        if name == "AttemptDispatched":
            state.attempts[attempt] = replace(
                state.run, attempt=attempt, attempt_status="dispatched",
                not_before_us=micros(record["not_before"]), dispatched_at_us=micros(record["at"]))
            state.run = replace(state.run, run_status="scheduled")
        elif name == "AttemptStarted":
            if row is None:
                raise MissingRun(f"AttemptStarted for undispatched attempt {attempt} of {run_id}")
            started = micros(record["started_at"])
            state.attempts[attempt] = replace(
                row, attempt_status="running", started_at_us=started,
                start_lag_us=started - row.not_before_us, worker=record["worker"])
            state.run = replace(state.run, run_status="running")
        elif name in ("AttemptSucceeded", "AttemptFailed"):
            if row is None:
                raise MissingRun(f"{name} for undispatched attempt {attempt} of {run_id}")
            output = bytes(record.get("output") or b"").decode("utf-8", errors="replace")
            state.attempts[attempt] = replace(
                row, attempt_status="succeeded" if name == "AttemptSucceeded" else "failed",
                finished_at_us=micros(record["finished_at"]), worker=record["worker"],
                output=output, output_truncated=int(bool(record["output_truncated"])),
                error=str(record.get("error") or ""))
            if name == "AttemptSucceeded":
                # A succeeded attempt ends its run (older logs add RunSucceeded after it).
                state.run = replace(state.run, run_status="succeeded")
        elif name in ("AttemptLost", "AttemptTimedOut", "AttemptCancelled"):
            if row is None:
                raise MissingRun(f"{name} for undispatched attempt {attempt} of {run_id}")
            status = {"AttemptLost": "lost", "AttemptTimedOut": "timed_out",
                      "AttemptCancelled": "cancelled"}[name]
            state.attempts[attempt] = replace(
                row, attempt_status=status, finished_at_us=micros(record["at"]),
                error=str(record.get("reason") or status))
        elif name == "RunSucceeded":
            state.run = replace(state.run, run_status="succeeded")
        elif name == "RunFailed":
            state.run = replace(state.run, run_status="dead_lettered",
                                reason=str(record["reason"]))
        elif name == "RunCancelled":
            state.run = replace(state.run, run_status="cancelled", reason=str(record["reason"]))
        return state

    def _trim(self) -> None:
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
