"""Gathers one apply's row changes and writes them in a few statements."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from cronlog.domain.exclusions import AppliedCalendar
from cronlog.infra.postgres.calendar_sql import (
    CLEAR_JOB_CALENDAR,
    COUNT_SUBSCRIBERS,
    PUT_CALENDAR,
    SET_JOB_CALENDAR,
    SUBSCRIBE,
    UNSUBSCRIBE,
    applied_to_json,
)
from cronlog.infra.postgres.channel_sql import STATEMENT_OF as CHANNEL_STATEMENTS
from cronlog.infra.postgres.connection import StateStoreError
from cronlog.infra.postgres.dependency_sql import (
    DELETE_SETTLED_ENDS,
    INSERT_SETTLED,
    INSERT_WAITING_END,
    PRUNE_SETTLED,
    SET_DEPENDENTS,
)
from cronlog.infra.postgres.job_listing import (
    INSERT_LISTINGS,
    LISTING_FIELDS,
    UPDATE_LISTING,
    listing_params,
    update_params,
)
from cronlog.infra.postgres.owner_sql import (
    COLUMN_OF,
    INSERT_JOBS,
    INSERT_REQUESTS,
    INSERT_RUNS,
    JOB_COLUMNS,
    JOB_INSERT_FIELDS,
    REQUEST_FIELDS,
    RUN_COLUMNS,
    RUN_INSERT_FIELDS,
    UPDATE_JOBS,
    UPDATE_RUNS,
)
from cronlog.infra.postgres.spec_history_sql import (
    KEEP_SPEC_FIELDS,
    KEEP_SPECS,
    KEEP_STORED_SPECS,
)
from cronlog.projections.channel_state import ChannelChange
from cronlog.projections.state import CalendarRow, JobRow, RunRow, SettledSlot, WaitingEnd

log = logging.getLogger(__name__)


class BatchingStateWriter:
    """Collects a batch's projection changes and writes them in a few statements.

    Several events of one aggregate in a batch fold into one row change (a run scheduled,
    dispatched and started in one owner cycle is one insert), and all updates of a table go
    in one statement, so the cost per event is a little Python, not a round trip.
    """

    def __init__(self, runs_before_the_log: bool = False) -> None:
        """runs_before_the_log: the run events were trimmed below where this projection
        starts (a rebuild on an empty database): a change to a run whose RunScheduled is
        gone from the log is of a run that began more than the retention ago, and is
        dropped rather than stopping the rebuild."""
        self._runs_before_the_log = runs_before_the_log
        self.job_inserts: dict[UUID, JobRow] = {}
        self.run_inserts: dict[UUID, RunRow] = {}
        self.job_updates: dict[UUID, dict[str, Any]] = {}
        self.run_updates: dict[UUID, dict[str, Any]] = {}
        self.requests: dict[tuple[UUID, str], dict[str, Any]] = {}
        self.dependents: dict[UUID, list[UUID]] = {}
        self.waiting_ends: list[WaitingEnd] = []
        self.settled: list[SettledSlot] = []
        # Calendars (issue 20), in the order their events came: rare next to fires.
        self.calendar_changes: list[tuple[str, dict[str, Any]]] = []
        # Specs replaced (issue 38, the job_specs table): those the store holds, by job and
        # when; those set earlier in this batch, as rows.
        self.stored_specs_replaced: dict[UUID, datetime] = {}
        self.specs_replaced: list[dict[str, Any]] = []

    def insert_job(self, row: JobRow) -> None:
        self.job_inserts[row.job_id] = row

    def update_job(self, job_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        columns = {COLUMN_OF.get(k, k): v for k, v in changes.items()}
        if "spec_event" in changes:
            self._keep_replaced_spec(job_id, at)
        if job_id in self.job_inserts:
            fields = {("spec_event" if k == "spec" else k): v for k, v in columns.items()}
            self.job_inserts[job_id] = replace(self.job_inserts[job_id], version=version,
                                               updated_at=at, **fields)
            return
        update = self.job_updates.setdefault(job_id, {})
        update.update(columns, version=version, updated_at=at)

    def _keep_replaced_spec(self, job_id: UUID, at: datetime) -> None:
        """The spec a change replaces goes to the job's spec history: from this batch's
        memory when set in it, else from the store (before the batch's update)."""
        inserted = self.job_inserts.get(job_id)
        updated = self.job_updates.get(job_id, {})
        if inserted is not None:
            spec, spec_version = inserted.spec_event, inserted.spec_version
        elif "spec" in updated:
            spec, spec_version = updated["spec"], updated.get("spec_version")
        else:
            self.stored_specs_replaced.setdefault(job_id, at)
            return
        if spec_version is not None:
            self.specs_replaced.append({"job_id": job_id, "spec_version": spec_version,
                                        "spec": spec, "replaced_at": at})

    def insert_run(self, row: RunRow) -> None:
        self.run_inserts[row.run_id] = row

    def update_run(self, run_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        if run_id in self.run_inserts:
            self.run_inserts[run_id] = replace(self.run_inserts[run_id], version=version,
                                               updated_at=at, **changes)
            return
        update = self.run_updates.setdefault(run_id, {})
        update.update(changes, version=version, updated_at=at)

    def record_request(self, request_id: str, partition: int, job_id: UUID,
                       job_version: int, command: str | None = None,
                       digest: str | None = None) -> None:
        key = (job_id, request_id)
        known = self.requests.get(key)
        if known is not None and (known["request_digest"] is not None or digest is None):
            return  # as INSERT_REQUESTS decides it
        self.requests[key] = {"request_id": request_id, "partition": partition,
                              "job_id": job_id, "job_version": job_version,
                              "command": command, "request_digest": digest}

    def set_dependents(self, job_id: UUID, dependents: tuple[UUID, ...]) -> None:
        self.dependents[job_id] = list(dependents)

    def wait_with(self, end: WaitingEnd) -> None:
        self.waiting_ends.append(end)

    def settle(self, slot: SettledSlot) -> None:
        self.settled.append(slot)

    def set_calendar(self, job_id: UUID, calendar: AppliedCalendar | None,
                     unless_named: str | None = None) -> None:
        if calendar is None:
            self.calendar_changes.append((CLEAR_JOB_CALENDAR, {"job_id": job_id,
                                                               "name": unless_named}))
        else:
            self.calendar_changes.append((SET_JOB_CALENDAR, {
                "job_id": job_id, "calendar": applied_to_json(calendar)}))

    def put_calendar(self, row: CalendarRow) -> None:
        self.calendar_changes.append((PUT_CALENDAR, {
            **row.__dict__, "exclusions": json.dumps(list(row.exclusions))}))

    def subscribe(self, calendar_id: UUID, job_id: UUID, partition: int,
                  subscribed: bool) -> None:
        params = {"calendar_id": calendar_id, "job_id": job_id, "partition": partition}
        self.calendar_changes.append((SUBSCRIBE if subscribed else UNSUBSCRIBE, params))
        self.calendar_changes.append((COUNT_SUBSCRIBERS, {"calendar_id": calendar_id}))

    def change_channel(self, change: ChannelChange) -> None:
        # Channels (issue 37): rarer still, in the order their events came.
        self.calendar_changes.append((CHANNEL_STATEMENTS[change.event], change.params()))

    def flush(self, cur: psycopg.Cursor[Any]) -> None:
        if self.job_inserts:
            jobs = list(self.job_inserts.values())
            cur.execute(INSERT_JOBS, {name: [getattr(row, name) for row in jobs]
                                      for name in JOB_INSERT_FIELDS})
            listed = [listing_params(row) for row in jobs]
            cur.execute(INSERT_LISTINGS, {name: [row[name] for row in listed]
                                          for name in LISTING_FIELDS})
        if self.run_inserts:
            rows = list(self.run_inserts.values())
            cur.execute(INSERT_RUNS, {name: [getattr(row, name) for row in rows]
                                      for name in RUN_INSERT_FIELDS})
        self._flush_spec_history(cur)
        if self.job_updates:
            self._update(cur, UPDATE_JOBS, "job_id", self.job_updates, JOB_COLUMNS, "jobs")
            listing = update_params(self.job_updates)
            if listing is not None:
                cur.execute(UPDATE_LISTING, listing)
        if self.run_updates:
            self._update(cur, UPDATE_RUNS, "run_id", self.run_updates, RUN_COLUMNS, "runs",
                         missing_ok=self._runs_before_the_log)
        if self.requests:
            requests = list(self.requests.values())
            cur.execute(INSERT_REQUESTS, {name: [row[name] for row in requests]
                                          for name in REQUEST_FIELDS})
        if self.dependents or self.waiting_ends or self.settled:
            self._flush_dependencies(cur)
        # After the jobs' inserts and updates: a job created with its calendar gets it here.
        for statement, params in self.calendar_changes:
            cur.execute(statement, params)

    def _flush_spec_history(self, cur: psycopg.Cursor[Any]) -> None:
        """Before the jobs' updates, which overwrite the stored specs kept here."""
        if self.stored_specs_replaced:
            cur.execute(KEEP_STORED_SPECS, {
                "job_id": list(self.stored_specs_replaced),
                "replaced_at": list(self.stored_specs_replaced.values())})
        if self.specs_replaced:
            cur.execute(KEEP_SPECS, {name: [row[name] for row in self.specs_replaced]
                                     for name in KEEP_SPEC_FIELDS})

    def _flush_dependencies(self, cur: psycopg.Cursor[Any]) -> None:
        """Rare next to runs (links change with specs, ends come once per upstream run), so
        row by row; ends before settlements, so a logical time settled in the same batch
        is left with no waiting end."""
        if self.dependents:
            cur.executemany(SET_DEPENDENTS, [{"job_id": k, "dependents": v}
                                             for k, v in self.dependents.items()])
        if self.waiting_ends:
            cur.executemany(INSERT_WAITING_END, [e.__dict__ for e in self.waiting_ends])
        if self.settled:
            slots = [{**s.__dict__, "upstream_run_ids": list(s.upstream_run_ids)}
                     for s in self.settled]
            cur.executemany(INSERT_SETTLED, slots)
            cur.executemany(DELETE_SETTLED_ENDS, slots)
            latest: dict[UUID, datetime] = {}
            for slot in self.settled:
                latest[slot.job_id] = max(latest.get(slot.job_id, slot.settled_at),
                                          slot.settled_at)
            cur.executemany(PRUNE_SETTLED, [{"job_id": k, "settled_at": v}
                                            for k, v in latest.items()])

    @staticmethod
    def _update(cur: psycopg.Cursor[Any], statement: str, key: str,
                updates: Mapping[UUID, Mapping[str, Any]], columns: Sequence[str],
                table: str, missing_ok: bool = False) -> None:
        keys = list(updates)
        params: dict[str, list[Any]] = {key: keys}
        for column in (*columns, "version", "updated_at"):
            params[column] = [updates[k].get(column) for k in keys]
        if table == "jobs":
            params["sets_next_fire_at"] = [("next_fire_at" in updates[k]) for k in keys]
        cur.execute(statement, params)
        found = {row[0] for row in cur.fetchall()}
        missing = [k for k in keys if k not in found]
        if missing and missing_ok:
            log.warning("%d %s rows not in the log any more (begun before its oldest "
                        "event): their changes are dropped, e.g. %s", len(missing), table,
                        missing[:3])
        elif missing:
            raise StateStoreError(f"{table} rows {missing[:3]} missing for an update")
