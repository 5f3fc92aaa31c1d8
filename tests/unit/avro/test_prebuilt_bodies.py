"""The prebuilt writers write exactly fastavro's bytes and the prebuilt readers read exactly
what fastavro reads, for every shipped schema; the writers refuse what fastavro's strict mode
refuses, and the codec reports an unreadable body as malformed."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.infra.avro.codec import (
    HEADER_SIZE,
    AvroCodec,
    InvalidRecord,
    MalformedMessage,
    SchemaVersion,
)
from cronlog.infra.avro.record_reader import build_reader
from cronlog.infra.avro.record_writer import RecordMismatch, build_writer
from tests.support.examples import examples
from tests.unit.avro.examples import EXAMPLES

CODEC = AvroCodec()
VERSIONS = {(v.name, v.version): v for v in CODEC.versions()}


def fastavro_body(version: SchemaVersion, record: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, version.schema, record, strict=True)
    return buffer.getvalue()


# Built once per schema version, as the codec does: building one compiles its code.
_WRITERS: dict[tuple[str, int], Any] = {}
_READERS: dict[tuple[str, int], Any] = {}


def prebuilt_body(version: SchemaVersion, record: dict[str, Any]) -> bytes:
    key = (version.name, version.version)
    if key not in _WRITERS:
        _WRITERS[key] = build_writer(version.raw)
    writer = _WRITERS[key]
    assert writer is not None, f"{version.name} v{version.version} has no prebuilt writer"
    out = bytearray()
    writer(record, out)
    return bytes(out)


def fastavro_read(version: SchemaVersion, body: bytes) -> Any:
    return fastavro.schemaless_reader(io.BytesIO(body), version.schema, None)


def prebuilt_read(version: SchemaVersion, body: bytes) -> Any:
    key = (version.name, version.version)
    if key not in _READERS:
        _READERS[key] = build_reader(version.raw)
    reader = _READERS[key]
    assert reader is not None, f"{version.name} v{version.version} has no prebuilt reader"
    value, end = reader(b"0123" + body, 4)
    assert end == 4 + len(body)
    return value


def same_values(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (a str is not a UUID)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_values(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, datetime):
        return a == b and bool(a.tzinfo == b.tzinfo)
    return bool(a == b)


@pytest.mark.parametrize("key", sorted(VERSIONS), ids=lambda k: f"{k[0]}.v{k[1]}")
def test_every_shipped_schema_is_written_and_read_as_fastavro_does(
        key: tuple[str, int]) -> None:
    version = VERSIONS[key]
    record = EXAMPLES[key]
    body = fastavro_body(version, record)
    assert prebuilt_body(version, record) == body
    assert same_values(prebuilt_read(version, body), fastavro_read(version, body))


# Records defined earlier in a schema, by name: a later field may name one (a DateRange).
_NAMED: dict[str, Any] = {}


def _value(schema: Any) -> st.SearchStrategy[Any]:
    """Values of a schema type, edges included (negative, huge, empty, non-ASCII)."""
    if isinstance(schema, list):
        return st.one_of(*[_value(branch) for branch in schema])
    if isinstance(schema, dict):
        logical = schema.get("logicalType")
        if logical == "uuid":
            return st.one_of(st.uuids(), st.uuids().map(str))
        if logical == "timestamp-micros":
            return st.one_of(
                st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2400, 1, 1),
                             timezones=st.just(UTC)),
                # Micros from the epoch a datetime can hold (years 1 to 9999).
                st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999))
        if logical == "date":
            # Days from the epoch a date can hold (years 1 to 9999).
            return st.one_of(st.dates(), st.integers(-719_162, 2_932_896))
        kind = schema["type"]
        if kind == "record":
            _NAMED[schema["name"]] = schema
            return st.fixed_dictionaries({f["name"]: _value(f["type"]) for f in schema["fields"]})
        if kind == "array":
            return st.lists(_value(schema["items"]), max_size=4)
        if kind == "map":
            return st.dictionaries(st.text(max_size=5), _value(schema["values"]), max_size=4)
        return _value(kind)
    if schema in _NAMED:
        return _value(_NAMED[schema])
    return {
        "null": st.none(), "boolean": st.booleans(),
        "int": st.integers(-(1 << 31), (1 << 31) - 1),
        "long": st.integers(-(1 << 63), (1 << 63) - 1),
        "double": st.floats(allow_nan=False), "string": st.text(max_size=20),
        "bytes": st.binary(max_size=20),
    }[schema]


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(sorted(VERSIONS)).flatmap(
    lambda key: st.tuples(st.just(key), _value(dict(VERSIONS[key].raw)))))
def test_any_valid_record_is_written_as_fastavro_writes_it(
        case: tuple[tuple[str, int], dict[str, Any]]) -> None:
    key, record = case
    version = VERSIONS[key]
    body = fastavro_body(version, record)
    assert prebuilt_body(version, record) == body
    assert same_values(prebuilt_read(version, body), fastavro_read(version, body))


def test_an_unreadable_body_is_a_malformed_message() -> None:
    data = CODEC.encode("AttemptStarted", EXAMPLES[("AttemptStarted", 1)])
    for cut in (HEADER_SIZE + 1, HEADER_SIZE + 20, len(data) - 1):
        with pytest.raises(MalformedMessage, match="AttemptStarted v1"):
            CODEC.decode(data[:cut])
    not_a_uuid = bytearray(data)
    not_a_uuid[HEADER_SIZE + 1] = ord("x")
    with pytest.raises(MalformedMessage, match="AttemptStarted v1"):
        CODEC.decode(bytes(not_a_uuid))


def test_a_naive_datetime_is_read_as_local_time_like_fastavro_does() -> None:
    version = VERSIONS[("AttemptStarted", 1)]
    record = {**EXAMPLES[("AttemptStarted", 1)], "started_at": datetime(2026, 3, 8, 7, 0, 1)}
    assert prebuilt_body(version, record) == fastavro_body(version, record)


@pytest.mark.parametrize(("change", "message"), [
    ({"attempt": "1"}, r"AttemptStarted\.attempt: expected an integer, got str"),
    ({"attempt": 1 << 40}, r"AttemptStarted\.attempt: .* out of the range of an int"),
    ({"version": 1 << 64}, r"AttemptStarted\.version: .* out of the range of a long"),
    ({"worker": None}, r"AttemptStarted\.worker: expected a string, got NoneType"),
    ({"started_at": "yesterday"}, r"AttemptStarted\.started_at: expected an integer"),
    ({"surplus": 1}, r"AttemptStarted: missing fields \[\], fields not in the schema "
                     r"\['surplus'\]"),
])
def test_a_record_that_does_not_fit_is_refused_naming_the_field(change: dict[str, Any],
                                                               message: str) -> None:
    record = {**EXAMPLES[("AttemptStarted", 1)], **change}
    with pytest.raises(RecordMismatch, match=message):
        prebuilt_body(VERSIONS[("AttemptStarted", 1)], record)


def test_a_missing_field_is_named() -> None:
    record = dict(EXAMPLES[("AttemptStarted", 1)])
    del record["worker"]
    with pytest.raises(RecordMismatch, match=r"missing fields \['worker'\]"):
        prebuilt_body(VERSIONS[("AttemptStarted", 1)], record)


def test_the_codec_reports_a_misfit_as_an_invalid_record_and_reads_what_it_wrote() -> None:
    record = {**EXAMPLES[("AttemptStarted", 1)], "attempt": "one"}
    with pytest.raises(InvalidRecord, match=r"AttemptStarted\.attempt"):
        CODEC.encode("AttemptStarted", record)
    started = datetime(2026, 12, 3, 14, 0, tzinfo=UTC) + timedelta(microseconds=7)
    data = CODEC.encode("AttemptStarted", {**EXAMPLES[("AttemptStarted", 1)],
                                           "started_at": started})
    name, decoded = CODEC.decode(data)
    assert name == "AttemptStarted" and decoded["started_at"] == started
    assert decoded["run_id"] == UUID("66666666-7777-8888-9999-aaaaaaaaaaaa")


def test_a_schema_with_a_type_they_do_not_cover_gets_neither_writer_nor_reader() -> None:
    fixed = {"type": "record", "name": "X", "fields": [
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}}]}
    millis = {"type": "record", "name": "X", "fields": [
        {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}}]}
    for schema in (fixed, millis):
        assert build_writer(schema) is None
        assert build_reader(schema) is None


def test_remembered_ids_and_timestamps_are_written_right_before_and_after_eviction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from uuid import uuid4

    from cronlog.infra.avro import record_writer

    monkeypatch.setattr(record_writer._UUIDS, "limit", 3)
    monkeypatch.setattr(record_writer._TIMESTAMPS, "limit", 2)
    version = VERSIONS[("AttemptStarted", 1)]
    ids = [uuid4() for _ in range(5)]
    times = [datetime(2026, 12, 3, tzinfo=UTC) + timedelta(seconds=s) for s in range(4)]
    for _ in range(2):
        for i, run_id in enumerate(ids):
            record = {**EXAMPLES[("AttemptStarted", 1)], "run_id": run_id,
                      "started_at": times[i % len(times)]}
            assert prebuilt_body(version, record) == fastavro_body(version, record)
    assert len(record_writer._UUIDS) <= 3 and len(record_writer._TIMESTAMPS) <= 2


_BOUNDS = {"type": "record", "name": "Bounds", "fields": [
    {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "s", "type": "string"}, {"name": "n", "type": ["null", "long"]}]}


@pytest.mark.parametrize("i", [0, -1, 63, -64, 64, -65, 8191, 8192, (1 << 31) - 1, -(1 << 31)])
@pytest.mark.parametrize("text", ["", "x" * 63, "x" * 64, "é" * 40, "\U0001f600" * 20])
def test_ints_and_strings_written_inline_are_fastavros_bytes_at_every_varint_edge(
        i: int, text: str) -> None:
    """Ints in range and plain strings are written by the record's generated code itself
    (record_writer._unrolled); a varint's length changes at each power of 128."""
    writer = build_writer(_BOUNDS)
    assert writer is not None
    for record in ({"i": i, "l": i * (1 << 31), "s": text, "n": i},
                   {"i": True, "l": -i, "s": text, "n": None}):
        out = bytearray()
        writer(record, out)
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, fastavro.parse_schema(_BOUNDS), record, strict=True)
        assert bytes(out) == buffer.getvalue()


@pytest.mark.parametrize(("change", "message"), [
    ({"i": 1 << 31}, r"Bounds\.i: .* out of the range of an int"),
    ({"l": -(1 << 63) - 1}, r"Bounds\.l: .* out of the range of a long"),
    ({"s": b"bytes"}, r"Bounds\.s: expected a string, got bytes"),
    ({"n": 1.5}, r"Bounds\.n: expected an integer, got float"),
])
def test_what_the_inline_code_does_not_take_is_refused_as_field_by_field(
        change: dict[str, Any], message: str) -> None:
    writer = build_writer(_BOUNDS)
    assert writer is not None
    with pytest.raises(RecordMismatch, match=message):
        writer({"i": 1, "l": 1, "s": "", "n": None, **change}, bytearray())


DATES = {"type": "record", "name": "Dates", "fields": [
    {"name": "days", "type": {"type": "array", "items": {"type": "int", "logicalType": "date"}}},
    {"name": "after", "type": "string"}]}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dates(), max_size=1200), st.text(max_size=5))
def test_an_array_of_dates_is_read_as_fastavro_reads_it(days: list[Any], after: str) -> None:
    """Dates are read inline (record_reader._read_dates): every date from year 1 to 9999,
    in one block, and the field after them at the right place."""
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(DATES), {"days": days,
                                                                      "after": after})
    body = buffer.getvalue()
    reader = build_reader(DATES)
    assert reader is not None
    assert reader(body, 0) == ({"days": days, "after": after}, len(body))
    assert reader(body, 0)[0] == fastavro.schemaless_reader(io.BytesIO(body),
                                                            fastavro.parse_schema(DATES), None)


def test_an_array_of_dates_in_blocks_with_sizes_and_a_cut_one() -> None:
    """A writer may split an array into blocks, each with a negative count and its size in
    bytes; a body cut inside the array fails the read rather than returning part of it."""
    reader = build_reader(DATES)
    assert reader is not None
    # Two blocks: 2 items (count -2, 2 bytes), then 1 item; the days 0, -1 and 2**20.
    varint_2_20 = bytes([0x80, 0x80, 0x80, 0x01])  # zigzag(2**20) = 2**21
    body = bytes([0x03, 0x04, 0x00, 0x01, 0x02]) + varint_2_20 + bytes([0x00, 0x02]) \
        + b"\x61"
    assert reader(body, 0)[0] == {"days": [datetime(1970, 1, 1).date(),
                                           datetime(1969, 12, 31).date(),
                                           (datetime(1970, 1, 1) + timedelta(days=2**20)).date()],
                                  "after": "a"}
    assert reader(body, 0)[0] == fastavro.schemaless_reader(io.BytesIO(body),
                                                            fastavro.parse_schema(DATES), None)
    with pytest.raises(IndexError):
        reader(body[:7], 0)
