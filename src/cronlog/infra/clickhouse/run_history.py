"""ClickHouseRunHistory: the run history tables, written by the projector, read by the api."""

from __future__ import annotations

import base64
import importlib.resources
import operator
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from clickhouse_driver import Client
from clickhouse_driver.errors import Error as ClickHouseError
from clickhouse_driver.errors import NetworkError, SocketTimeoutError

from cronlog.infra.clickhouse.history_sql import (
    ATTEMPT_COLUMNS,
    ATTEMPT_ROW_BYTES,
    DEPENDENCY_COLUMNS,
    EVENT_COLUMNS,
    FILL_RUN_KEYS,
    INSERT_ATTEMPTS,
    INSERT_DEPENDENCY_EVENTS,
    INSERT_EVENTS,
    INSERT_JOB_EVENTS,
    INSERT_JOBS,
    INSERT_MISSED,
    INSERT_RUN_KEYS,
    JOB_COLUMNS,
    JOB_DEPENDENCY_EVENTS,
    JOB_EVENT_COLUMNS,
    JOB_MISSED_RANGES,
    JOB_TIMELINE,
    LIST_RUN_KEYS,
    MISSED_COLUMNS,
    RUN_ATTEMPTS,
    RUN_LOCATIONS,
    RUN_SIZES,
    SELECT_JOBS,
    TABLE_COLUMNS,
    TABLES,
)
from cronlog.infra.page_bytes import PAGE_BYTES, cut
from cronlog.ports import StoreUnavailable, StoreUnreachable
from cronlog.projections.history import AttemptRow, RunEventRow
from cronlog.projections.job_history import (
    DependencyEventRow,
    JobHistoryRow,
    MissedFireTimesRow,
)
from cronlog.projections.job_timeline import JobEventRow

_DATABASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_attempt_values = operator.attrgetter(*ATTEMPT_COLUMNS)
_RUN_ID, _ATTEMPT = ATTEMPT_COLUMNS.index("run_id"), ATTEMPT_COLUMNS.index("attempt")
_event_values = operator.attrgetter(*EVENT_COLUMNS)
_missed_values = operator.attrgetter(*MISSED_COLUMNS)
_dependency_values = operator.attrgetter(*DEPENDENCY_COLUMNS)
_job_event_values = operator.attrgetter(*JOB_EVENT_COLUMNS)
_ADDED_COLUMN = re.compile(r"ALTER TABLE \{db\}\.(\w+) ADD COLUMN (\w+) ")


class HistoryStoreError(StoreUnavailable):
    """ClickHouse refused or failed a history read or write."""


class HistoryStoreUnreachable(HistoryStoreError, StoreUnreachable):
    """ClickHouse did not answer at all: a restart, a network fault."""


# The errors of a connection, as opposed to those the server answered with.
_UNREACHABLE = (NetworkError, SocketTimeoutError, OSError, EOFError)


class InvalidRunPageToken(ValueError):
    """A page token that this service did not hand out."""


@dataclass(frozen=True)
class RunFilter:
    job_id: str | None = None
    tenant: str | None = None
    status: str | None = None
    scheduled_after: datetime | None = None
    scheduled_before: datetime | None = None


def _day_second(micros: int) -> datetime:
    """The naive UTC DateTime column (whole seconds) a row's partition key derives from."""
    return datetime.fromtimestamp(micros // 1_000_000, UTC).replace(tzinfo=None)


def _attempt_row(values: Sequence[Any]) -> AttemptRow:
    row = AttemptRow(*values)
    return replace(row, upstream_run_ids=tuple(row.upstream_run_ids))


def _to_us(value: datetime) -> int:
    return int(value.astimezone(UTC).timestamp() * 1_000_000)


def _split_statements(ddl: str) -> list[str]:
    without_comments = re.sub(r"--[^\n]*", "", ddl)
    return [s.strip() for s in without_comments.split(";") if s.strip()]


def encode_page_token(scheduled_at_us: int, run_id: str) -> str:
    return base64.urlsafe_b64encode(f"{scheduled_at_us}|{run_id}".encode()).decode()


def decode_page_token(token: str) -> tuple[int, str]:
    try:
        at, run_id = base64.urlsafe_b64decode(token.encode()).decode().split("|")
        return int(at), run_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRunPageToken(f"page_token {token!r} is not valid") from exc


class _Clients:
    """Connections for callers on many threads (the api's server threads). A
    clickhouse_driver Client is one connection and not thread-safe: two api calls reading
    the history at once through one client broke it ("Simultaneous queries on single
    connection detected", then the driver's own disconnect raising), so one tenant's
    ListRuns failed another's as UNAVAILABLE. Each call takes an idle client or makes one;
    there are never more than the calls that ran at once (at most the api's threads), and
    every one is kept for the next call."""

    def __init__(self, make: Callable[[], Client]) -> None:
        self._make = make
        self._idle: list[Client] = []
        self._lock = threading.Lock()

    @contextmanager
    def taken(self) -> Iterator[Client]:
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            client = self._make()
        try:
            yield client
        finally:
            with self._lock:
                self._idle.append(client)


class ClickHouseRunHistory:
    def __init__(self, host: str, port: int, database: str, user: str = "default",
                 password: str = "", *, secure: bool = False, verify: bool = True,
                 ca_file: str = "") -> None:
        """secure: TLS to the server's secure native port, its certificate checked (unless
        verify is off) against ca_file, or the system's authorities when that is empty."""
        if not _DATABASE_NAME.fullmatch(database):
            raise ValueError(f"ClickHouse database name {database!r} is not a plain identifier")
        self._db = database
        tls: dict[str, Any] = {}
        if secure:
            tls = {"secure": True, "verify": verify, "ca_certs": ca_file or None}
        self._clients = _Clients(lambda: Client(
            host=host, port=port, user=user, password=password, connect_timeout=10,
            send_receive_timeout=60, **tls))

    @property
    def database(self) -> str:
        return self._db

    def execute(self, query: str, params: Any = None) -> Any:
        """Runs one statement; for maintenance and analytics, not for the hot paths."""
        return self._execute(query, params)

    def _sql(self, template: str, **parts: str) -> str:
        return (template.replace("{db}", self._db).replace("{filters}", parts.get("filters", ""))
                .replace("{final}", parts.get("final", "")))

    def _execute(self, query: str, params: Any = None) -> Any:
        with self._clients.taken() as client:
            try:
                return client.execute(query, params)
            except _UNREACHABLE as exc:
                client.disconnect()
                raise HistoryStoreUnreachable(f"ClickHouse: {exc}") from exc
            except (ClickHouseError, OSError, EOFError) as exc:
                client.disconnect()
                raise HistoryStoreError(f"ClickHouse: {exc}") from exc

    def ensure_schema(self) -> None:
        package = importlib.resources.files("cronlog.infra.clickhouse")
        before = {row[0] for row in self._execute(TABLES, {"db": self._db})}
        for statement in _split_statements(package.joinpath("schema.sql").read_text()):
            self._execute(self._sql(statement))
        for statement in _split_statements(package.joinpath("schema_columns.sql").read_text()):
            self._add_column(statement)
        if "runs" in before and "run_keys" not in before:
            # Runs written before run_keys existed: found by id only once they are in it.
            # A projector writing meanwhile adds the same keys, which collapse.
            self._execute(self._sql(FILL_RUN_KEYS))

    def _columns(self) -> set[tuple[str, str]]:
        return {(table, name) for table, name in self._execute(TABLE_COLUMNS, {"db": self._db})}

    def _add_column(self, statement: str) -> None:
        """Runs one ALTER TABLE ... ADD COLUMN of schema_columns.sql unless the table has
        the column (created with it, or added before). Another process bringing the same
        database up to date may add it between the look and the ALTER: that refusal is
        no error once the column is there."""
        found = _ADDED_COLUMN.match(statement)
        if found is None:
            raise ValueError(f"schema_columns.sql: not one ADD COLUMN: {statement!r}")
        column = (found.group(1), found.group(2))
        if column in self._columns():
            return
        try:
            self._execute(self._sql(statement))
        except HistoryStoreError:
            if column not in self._columns():
                raise

    def write_attempt_rows(self, rows: Sequence[AttemptRow]) -> None:
        # Rows as tuples in the INSERT's column order: dataclasses.asdict copies every
        # field recursively, and was a tenth of the projector's time.
        values = [(_day_second(row.scheduled_at_us), _day_second(row.logical_time_us),
                   *_attempt_values(row)) for row in rows]
        # The keys first: a run in `runs` is always found by its id. A key whose rows then
        # fail to be written finds nothing, and the batch is written again.
        keys = {row.run_id: (values[i][0], row.run_id, row.tenant, row.job_id)
                for i, row in enumerate(rows)}
        self._execute(self._sql(INSERT_RUN_KEYS), list(keys.values()))
        self._execute(self._sql(INSERT_ATTEMPTS), values)

    def write_run_events(self, rows: Sequence[RunEventRow]) -> None:
        values = [(_day_second(r.at_us), *_event_values(r)) for r in rows]
        self._execute(self._sql(INSERT_EVENTS), values)

    def write_job_rows(self, rows: Sequence[JobHistoryRow]) -> None:
        values = [{"created_at": datetime.fromtimestamp(r.created_at_us // 1_000_000, UTC)
                   .replace(tzinfo=None), **asdict(r),
                   "label_keys": list(r.label_keys), "label_values": list(r.label_values),
                   "after_job_ids": list(r.after_job_ids),
                   "dependent_job_ids": list(r.dependent_job_ids)}
                  for r in rows]
        self._execute(self._sql(INSERT_JOBS), values)

    def write_missed_fire_times(self, rows: Sequence[MissedFireTimesRow]) -> None:
        values = [(_day_second(r.recorded_at_us), _day_second(r.first_us),
                   _day_second(r.last_us), *_missed_values(r)) for r in rows]
        self._execute(self._sql(INSERT_MISSED), values)

    def write_dependency_events(self, rows: Sequence[DependencyEventRow]) -> None:
        values = [(_day_second(r.at_us), _day_second(r.logical_time_us), *_dependency_values(r))
                  for r in rows]
        self._execute(self._sql(INSERT_DEPENDENCY_EVENTS), values)

    def write_job_events(self, rows: Sequence[JobEventRow]) -> None:
        values = [(_day_second(r.at_us), *_job_event_values(r)) for r in rows]
        self._execute(self._sql(INSERT_JOB_EVENTS), values)

    def job_events(self, tenant: str, job_id: str) -> list[JobEventRow]:
        rows = self._execute(self._sql(JOB_TIMELINE), {"tenant": tenant, "job_id": job_id})
        return [JobEventRow(*values) for values in rows]

    def dependency_events(self, tenant: str, job_id: str) -> list[DependencyEventRow]:
        rows = self._execute(self._sql(JOB_DEPENDENCY_EVENTS),
                             {"tenant": tenant, "job_id": job_id})
        return [DependencyEventRow(*values) for values in rows]

    def missed_fire_times(self, tenant: str, job_id: str) -> list[MissedFireTimesRow]:
        rows = self._execute(self._sql(JOB_MISSED_RANGES), {"tenant": tenant, "job_id": job_id})
        return [MissedFireTimesRow(*values) for values in rows]

    def latest_job_rows(self, job_ids: Sequence[str]) -> dict[str, JobHistoryRow]:
        rows = self._execute(self._sql(SELECT_JOBS), {"job_ids": tuple(job_ids)})
        result = {}
        for values in rows:
            data = dict(zip(JOB_COLUMNS, values, strict=True))
            data["label_keys"] = tuple(data["label_keys"])
            data["label_values"] = tuple(data["label_values"])
            data["after_job_ids"] = tuple(data["after_job_ids"])
            data["dependent_job_ids"] = tuple(data["dependent_job_ids"])
            result[data["job_id"]] = JobHistoryRow(**data)
        return result

    def latest_attempt_rows(self, run_ids: Sequence[str]) -> dict[str, list[AttemptRow]]:
        result: dict[str, list[AttemptRow]] = {r: [] for r in run_ids}
        if not run_ids:
            return result
        located = self._execute(self._sql(RUN_LOCATIONS), {"run_ids": tuple(run_ids)})
        for run_id, rows in self._attempts_at(located).items():
            result[run_id] = rows
        return result

    def _attempts_at(self, located: Sequence[Sequence[Any]]) -> dict[str, list[AttemptRow]]:
        """The attempt rows of runs at these (tenant, job id, scheduled_at second, run id)."""
        result: dict[str, list[AttemptRow]] = {}
        if not located:
            return result
        params = {"tenants": tuple({r[0] for r in located}),
                  "job_ids": tuple({r[1] for r in located}),
                  "times": tuple({int(r[2]) for r in located}),
                  "run_ids": tuple({r[3] for r in located})}
        newest: dict[tuple[str, int], Sequence[Any]] = {}
        for values in self._execute(self._sql(RUN_ATTEMPTS), params):
            newest[(values[_RUN_ID], values[_ATTEMPT])] = values  # in version order
        for values in newest.values():
            row = _attempt_row(values)
            result.setdefault(row.run_id, []).append(row)
        return result

    def get_run(self, run_id: str) -> list[AttemptRow]:
        return self.latest_attempt_rows([run_id]).get(run_id, [])

    def list_runs(self, run_filter: RunFilter, page_size: int, page_token: str | None,
                  max_bytes: int = PAGE_BYTES) -> tuple[list[list[AttemptRow]], str | None]:
        """At most page_size runs, newest first, and past the first at most max_bytes of
        their attempts' outputs and errors; the token is the position after the last."""
        conditions: list[str] = []
        params: dict[str, Any] = {"limit": page_size + 1}
        if run_filter.job_id:
            conditions.append("job_id = %(job_id)s")
            params["job_id"] = run_filter.job_id
        if run_filter.tenant:
            conditions.append("tenant = %(tenant)s")
            params["tenant"] = run_filter.tenant
        if run_filter.status:
            conditions.append("run_status = %(status)s")
            params["status"] = run_filter.status
        if run_filter.scheduled_after:
            conditions.append("scheduled_at_us >= %(after)s")
            params["after"] = _to_us(run_filter.scheduled_after)
        if run_filter.scheduled_before:
            conditions.append("scheduled_at_us < %(before)s")
            params["before"] = _to_us(run_filter.scheduled_before)
        if page_token:
            at_us, last_run = decode_page_token(page_token)
            conditions.append("(scheduled_at_us < %(tok_at)s OR "
                              "(scheduled_at_us = %(tok_at)s AND run_id < %(tok_run)s))")
            params.update(tok_at=at_us, tok_run=last_run)
        filters = "".join(f" AND {c}" for c in conditions)
        keys = self._execute(self._sql(LIST_RUN_KEYS, filters=filters,
                                       final="FINAL" if run_filter.status else ""), params)
        # The page in bytes too (page_bytes.cut): the candidates' sizes first, then the
        # attempt rows of those that fit; no run past the page is read whole.
        sizes = self._run_sizes([(tenant, job_id, at, run_id)
                                 for _, run_id, tenant, job_id, at in keys])
        kept = cut([sizes.get(key[1], 0) for key in keys], page_size, max_bytes)
        more = len(keys) > kept
        keys = keys[:kept]
        # The page's keys say where its runs are: no run_keys lookup needed.
        attempts = self._attempts_at([(tenant, job_id, at, run_id)
                                      for _, run_id, tenant, job_id, at in keys])
        runs = [attempts.get(key[1], []) for key in keys]
        token = encode_page_token(keys[-1][0], keys[-1][1]) if more and keys else None
        return runs, token

    def _run_sizes(self, located: Sequence[Sequence[Any]]) -> dict[str, int]:
        """The bytes of each run at these (tenant, job id, scheduled_at second, run id)."""
        if not located:
            return {}
        params = {"tenants": tuple({r[0] for r in located}),
                  "job_ids": tuple({r[1] for r in located}),
                  "times": tuple({int(r[2]) for r in located}),
                  "run_ids": tuple({r[3] for r in located})}
        sizes: dict[str, int] = {}
        for run_id, _, size in self._execute(self._sql(RUN_SIZES), params):
            sizes[run_id] = sizes.get(run_id, 0) + int(size) + ATTEMPT_ROW_BYTES
        return sizes
