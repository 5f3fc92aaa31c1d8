"""Hypothesis strategies for schema-valid records of any shipped Avro schema.

Schema-valid is all an attacker needs to reach the owner or the projector: the generated
values are what a hostile client, a buggy worker or an old producer could put on a topic.
Field names steer some values towards the ones that reach deep code paths (ids of a job
that exists, cron expressions, zones, outcomes), while any other value stays possible.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from hypothesis import strategies as st

SCHEMAS = Path(__file__).resolve().parents[3] / "src/cronlog/infra/avro/schemas"
_FILE = re.compile(r"(?P<name>[A-Za-z]+)\.v(?P<version>\d+)\.avsc")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
INSTANTS = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                 timezones=st.just(UTC)),
    st.sampled_from([EPOCH, EPOCH - timedelta(microseconds=1), datetime(2100, 1, 1, tzinfo=UTC),
                     datetime(9999, 12, 30, tzinfo=UTC), datetime(2026, 12, 4, 12, tzinfo=UTC)]),
    st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1),
                 timezones=st.just(UTC)),
)
CRONS = st.one_of(st.sampled_from([
    "* * * * *", "*/5 * * * * *", "0 0 31 2 *", "30 2 * * *", "0 0 29 2 1", "@hourly",
    "59 23 31 12 *", "0-59/7 0-6/3 1,15 * 1-5", "* * * * * * *", "", "L W # ?",
]), st.text(max_size=30))
ZONES = st.one_of(st.sampled_from(["UTC", "Europe/Berlin", "America/New_York",
                                   "Australia/Lord_Howe", "Pacific/Chatham", "Nowhere/Land",
                                   ""]), st.text(max_size=20))
LONGS = st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1),
                  st.integers(min_value=-10, max_value=100_000))
INTS = st.one_of(st.integers(min_value=-(2**31), max_value=2**31 - 1),
                 st.integers(min_value=-2, max_value=5))


def newest_schemas() -> dict[str, dict[str, Any]]:
    found: dict[str, tuple[int, dict[str, Any]]] = {}
    for path in SCHEMAS.glob("*.avsc"):
        match = _FILE.fullmatch(path.name)
        assert match is not None, path
        version = int(match["version"])
        if version >= found.get(match["name"], (0, {}))[0]:
            found[match["name"]] = (version, json.loads(path.read_text()))
    return {name: schema for name, (_, schema) in found.items()}


def records(schema: Mapping[str, Any], job_ids: Sequence[UUID] = (),
            run_ids: Sequence[UUID] = ()) -> st.SearchStrategy[dict[str, Any]]:
    return _Walk(job_ids, run_ids).of(schema, {})


class _Walk:
    def __init__(self, job_ids: Sequence[UUID], run_ids: Sequence[UUID]) -> None:
        self.job_ids = list(job_ids)
        self.run_ids = list(run_ids)

    def _ids(self, known: list[UUID]) -> st.SearchStrategy[Any]:
        fresh = st.uuids().map(str)
        return st.one_of(st.sampled_from([str(i) for i in known]), fresh) if known else fresh

    def of(self, schema: Any, named: dict[str, Any], field: str = "") -> st.SearchStrategy[Any]:
        if isinstance(schema, list):
            return st.one_of(*(self.of(s, named, field) for s in schema))
        if isinstance(schema, str):
            if schema in named:
                return self.of(named[schema], named, field)
            return self._primitive(schema, None, field)
        kind = schema["type"]
        if kind == "record":
            named[schema["name"]] = schema
            named[f"{schema.get('namespace', 'cronlog.v1')}.{schema['name']}"] = schema
            return st.fixed_dictionaries({
                f["name"]: self.of(f["type"], named, f["name"]) for f in schema["fields"]})
        if kind == "array":
            return st.lists(self.of(schema["items"], named, field), max_size=3)
        if kind == "map":
            return st.dictionaries(st.text(max_size=8), self.of(schema["values"], named, field),
                                   max_size=3)
        if kind == "enum":
            named[schema["name"]] = schema
            return st.sampled_from(schema["symbols"])
        return self._primitive(kind, schema.get("logicalType"), field)

    def _primitive(self, kind: str, logical: str | None, field: str) -> st.SearchStrategy[Any]:
        if logical == "uuid":
            if field == "job_id":
                return self._ids(self.job_ids)
            if field == "run_id":
                return self._ids(self.run_ids)
            return st.uuids().map(str)
        if logical in ("timestamp-micros", "timestamp-millis"):
            return INSTANTS
        if logical == "date":
            # Excluded days (issue 20): in and around the accepted range, and any a date holds.
            return st.one_of(st.dates(min_value=date(1969, 12, 1), max_value=date(2100, 1, 31)),
                             st.dates())
        if kind == "string":
            if field == "cron":
                return CRONS
            if field == "time_zone":
                return ZONES
            if field == "outcome":
                return st.one_of(st.sampled_from(["succeeded", "failed"]), st.text(max_size=5))
            if field in ("misfire_policy", "overlap_policy"):
                return st.one_of(st.sampled_from(["run_latest", "run_all", "skip", "allow",
                                                  "buffer_one", "cancel_other"]),
                                 st.text(max_size=5))
            if field == "kind":
                return st.sampled_from(["cron", "at", "other"])
            return st.text(max_size=40)
        if kind == "bytes":
            return st.binary(max_size=64)
        if kind == "boolean":
            return st.booleans()
        if kind == "int":
            return INTS
        if kind == "long":
            return LONGS
        if kind in ("float", "double"):
            return st.floats(allow_nan=True, allow_infinity=True)
        if kind == "null":
            return st.none()
        raise AssertionError(f"no strategy for Avro type {kind}")
