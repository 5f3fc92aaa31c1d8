"""An in-memory run history that takes inserts the way ClickHouse 18.16 does.

An INSERT is all or nothing: one value its column cannot hold (a DateTime outside
1970-01-01 00:00:00 .. 2106-02-07 06:28:15 UTC, a negative or too large UInt, an Int64
overflow, a non-string String) refuses the whole insert with the error the real adapter
raises. Reads answer like `SELECT ... FINAL` on the ReplacingMergeTree tables of
src/cronlog/infra/clickhouse/schema.sql: per sorting key the highest version, the last
inserted on a tie. Which row field goes to which column follows run_history.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cronlog.infra.clickhouse.run_history import HistoryStoreError
from cronlog.projections.history import AttemptRow, RunEventRow
from cronlog.projections.job_history import DependencyEventRow, JobHistoryRow, MissedFireTimesRow
from cronlog.projections.job_timeline import JobEventRow

DATETIME_SECONDS = (0, 2**32 - 1)
RANGES = {"UInt8": (0, 2**8 - 1), "UInt32": (0, 2**32 - 1), "UInt64": (0, 2**64 - 1),
          "Int64": (-(2**63), 2**63 - 1)}

# Column types of each table, for the row fields that reach them (schema.sql).
RUNS = {"scheduled_at_us": "Int64", "attempt": "UInt32", "max_attempts": "UInt32",
        "not_before_us": "Int64", "dispatched_at_us": "Int64", "started_at_us": "Int64",
        "finished_at_us": "Int64", "start_lag_us": "Int64", "output_truncated": "UInt8",
        "version": "UInt64", "tenant": "String", "job_id": "String", "run_id": "String",
        "queue": "String", "handler": "String", "trigger": "String", "run_status": "String",
        "attempt_status": "String", "worker": "String", "output": "String", "error": "String",
        "reason": "String", "logical_time_us": "Int64", "depth": "UInt32"}
RUN_EVENTS = {"at_us": "Int64", "version": "UInt64", "attempt": "UInt32", "tenant": "String",
              "job_id": "String", "run_id": "String", "event_type": "String", "body": "String"}
JOBS = {"created_at_us": "Int64", "at_us": "Int64", "updated_at_us": "Int64",
        "version": "UInt64", "tenant": "String", "job_id": "String", "name": "String",
        "queue": "String", "handler": "String", "cron": "String", "time_zone": "String",
        "status": "String", "after_condition": "String", "wait_window_ms": "Int64",
        "schedule_kind": "String", "every_ms": "UInt64"}
DEPENDENCY = {"at_us": "Int64", "logical_time_us": "Int64", "opened_at_us": "Int64",
              "version": "UInt64", "depth": "UInt32", "tenant": "String", "job_id": "String",
              "event_type": "String", "dependent_job_id": "String", "upstream_job_id": "String",
              "upstream_run_id": "String", "upstream_status": "String", "cascade": "String",
              "folded": "String", "reason": "String"}
MISSED = {"recorded_at_us": "Int64", "first_us": "Int64", "last_us": "Int64",
          "count": "UInt64", "version": "UInt64", "tenant": "String", "job_id": "String",
          "reason": "String"}
JOB_EVENTS = {"at_us": "Int64", "version": "UInt64", "tenant": "String", "job_id": "String",
              "event_type": "String", "request_id": "String", "actor": "String",
              "summary": "String"}


class ValueRefused(HistoryStoreError):
    """What the adapter raises when the driver refuses a value (TypeMismatchError)."""


def _check(table: str, row: object, columns: dict[str, str],
           datetimes: dict[str, Callable[[Any], int]]) -> None:
    for name, kind in columns.items():
        value = getattr(row, name)
        if kind == "String":
            if not isinstance(value, str):
                raise ValueRefused(f"ClickHouse: {table}.{name} is not a String: {value!r}")
            continue
        low, high = RANGES[kind]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueRefused(f"ClickHouse: Type mismatch in VALUES section, {table}.{name} "
                               f"{kind} cannot hold {value!r}")
    for name, seconds in datetimes.items():
        at = seconds(row)
        if not DATETIME_SECONDS[0] <= at <= DATETIME_SECONDS[1]:
            raise ValueRefused(f"ClickHouse: Type mismatch in VALUES section, {table}.{name} "
                               f"DateTime cannot hold {at} s")


def _seconds(attribute: str) -> Callable[[Any], int]:
    return lambda row: getattr(row, attribute) // 1_000_000


def _final(rows: Sequence[Any], key: Callable[[Any], tuple[Any, ...]]) -> list[Any]:
    kept: dict[tuple[Any, ...], Any] = {}
    for row in rows:
        k = key(row)
        if k not in kept or kept[k].version <= row.version:
            kept[k] = row
    return list(kept.values())


def _runs_key(r: AttemptRow) -> tuple[Any, ...]:
    return (r.tenant, r.job_id, r.scheduled_at_us // 1_000_000, r.run_id, r.attempt)


def _jobs_key(r: JobHistoryRow) -> tuple[Any, ...]:
    return (r.created_at_us // 86_400_000_000, r.tenant, r.job_id)


@dataclass
class ClickHouseLikeHistory:
    """Every table's inserted rows, in insert order (what a merge has not collapsed yet)."""

    validate: bool = True
    runs: list[AttemptRow] = field(default_factory=list)
    run_events: list[RunEventRow] = field(default_factory=list)
    jobs: list[JobHistoryRow] = field(default_factory=list)
    missed: list[MissedFireTimesRow] = field(default_factory=list)
    dependency: list[DependencyEventRow] = field(default_factory=list)
    job_events: list[JobEventRow] = field(default_factory=list)
    refused: int = 0

    def _insert(self, table: str, into: list[Any], rows: Sequence[Any], columns: dict[str, str],
                datetimes: dict[str, Callable[[Any], int]]) -> None:
        if self.validate:
            try:
                for row in rows:
                    _check(table, row, columns, datetimes)
            except ValueRefused:
                self.refused += 1
                raise
        into.extend(rows)

    def write_attempt_rows(self, rows: Sequence[AttemptRow]) -> None:
        self._insert("runs", self.runs, rows, RUNS, {"scheduled_at": _seconds("scheduled_at_us"),
                                                     "logical_time": _seconds("logical_time_us")})

    def write_run_events(self, rows: Sequence[RunEventRow]) -> None:
        self._insert("run_events", self.run_events, rows, RUN_EVENTS, {"at": _seconds("at_us")})

    def write_job_rows(self, rows: Sequence[JobHistoryRow]) -> None:
        for row in rows:
            if self.validate and not all(isinstance(v, str)
                                         for v in (*row.label_keys, *row.label_values)):
                raise ValueRefused(f"ClickHouse: jobs labels are not Array(String): {row!r}")
        self._insert("jobs", self.jobs, rows, JOBS,
                     {"created_at": _seconds("created_at_us")})

    def write_missed_fire_times(self, rows: Sequence[MissedFireTimesRow]) -> None:
        self._insert("missed_fire_times", self.missed, rows, MISSED,
                     {"recorded_at": _seconds("recorded_at_us"), "first": _seconds("first_us"),
                      "last": _seconds("last_us")})

    def write_dependency_events(self, rows: Sequence[DependencyEventRow]) -> None:
        self._insert("dependency_events", self.dependency, rows, DEPENDENCY,
                     {"at": _seconds("at_us"), "logical_time": _seconds("logical_time_us")})

    def write_job_events(self, rows: Sequence[JobEventRow]) -> None:
        self._insert("job_events", self.job_events, rows, JOB_EVENTS, {"at": _seconds("at_us")})

    def final_dependency_events(self) -> list[DependencyEventRow]:
        return _final(self.dependency, lambda r: (r.tenant, r.job_id, r.version))

    def final_runs(self) -> list[AttemptRow]:
        return _final(self.runs, _runs_key)

    def final_jobs(self) -> list[JobHistoryRow]:
        return _final(self.jobs, _jobs_key)

    def latest_attempt_rows(self, run_ids: Sequence[str]) -> dict[str, list[AttemptRow]]:
        result: dict[str, list[AttemptRow]] = {r: [] for r in run_ids}
        wanted = set(run_ids)
        for row in sorted(self.final_runs(), key=lambda r: (r.run_id, r.attempt)):
            if row.run_id in wanted:
                result[row.run_id].append(row)
        return result

    def latest_job_rows(self, job_ids: Sequence[str]) -> dict[str, JobHistoryRow]:
        wanted = set(job_ids)
        return {r.job_id: r for r in self.final_jobs() if r.job_id in wanted}
