"""Avro binary bodies read by readers built once per schema.

The counterpart of record_writer: fastavro took about 8 µs to read a five-field worker
report, which the owner does twice per run and the history projector five times. A reader
built ahead of time returns what fastavro's reader returns (uuid fields as UUID,
timestamp-micros as UTC datetimes; tested against fastavro for every shipped schema).

It reads a body written with the same schema only: a body from an older schema version is
resolved against the newest by fastavro (AvroCodec.decode).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any
from uuid import UUID

from cronlog.infra.avro.schema_walk import Parts, assemble

# Reads one value at a position of a body; returns it and the position after it.
ValueReader = Callable[[bytes, int], tuple[Any, int]]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DAY = date(1970, 1, 1)
_EPOCH_ORDINAL = _EPOCH_DAY.toordinal()
_from_ordinal = date.fromordinal
_DOUBLE = struct.Struct("<d")


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    pos += 1
    n = byte & 0x7F
    shift = 7
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), pos


def _read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    size, pos = _read_long(data, pos)
    end = pos + size
    if size < 0 or end > len(data):
        raise EOFError(f"{size} bytes announced at {pos}, {len(data) - pos} left")
    return data[pos:end], end


def _read_string(data: bytes, pos: int) -> tuple[str, int]:
    raw, pos = _read_bytes(data, pos)
    return raw.decode(), pos


# Ids read before, by their encoded text: a run's id comes in its start and its end
# report, a job's in every report of its runs, and UUID() parses the text in Python (a
# fifth of reading a report). UUIDs are immutable, so one object serves every record.
# Emptied when full rather than kept in order: a miss only costs the parse.
_UUIDS: dict[bytes, UUID] = {}
_REMEMBERED_UUIDS = 50_000


def _read_uuid(data: bytes, pos: int) -> tuple[UUID, int]:
    raw, end = _read_bytes(data, pos)
    known = _UUIDS.get(raw)
    if known is not None:
        return known, end
    value = UUID(raw.decode())
    if len(_UUIDS) >= _REMEMBERED_UUIDS:
        _UUIDS.clear()
    _UUIDS[raw] = value
    return value, end


def _read_timestamp_micros(data: bytes, pos: int) -> tuple[datetime, int]:
    micros, pos = _read_long(data, pos)
    return _EPOCH + timedelta(microseconds=micros), pos


def _read_boolean(data: bytes, pos: int) -> tuple[bool, int]:
    return data[pos] != 0, pos + 1


def _read_double(data: bytes, pos: int) -> tuple[float, int]:
    return _DOUBLE.unpack_from(data, pos)[0], pos + 8


def _read_null(data: bytes, pos: int) -> tuple[None, int]:
    return None, pos


_PRIMITIVES: dict[str, ValueReader] = {
    "null": _read_null, "boolean": _read_boolean, "int": _read_long, "long": _read_long,
    "double": _read_double, "string": _read_string, "bytes": _read_bytes,
}
def _read_date(data: bytes, pos: int) -> tuple[date, int]:
    days, pos = _read_long(data, pos)
    return _EPOCH_DAY + timedelta(days=days), pos


_LOGICAL: dict[tuple[str, str], ValueReader] = {
    ("string", "uuid"): _read_uuid, ("long", "timestamp-micros"): _read_timestamp_micros,
    ("int", "date"): _read_date,
}


def _union(branches: list[ValueReader]) -> ValueReader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        index, pos = _read_long(data, pos)
        if not 0 <= index < len(branches):
            raise ValueError(f"union branch {index} of {len(branches)}")
        return branches[index](data, pos)
    return read


def _blocks(data: bytes, pos: int) -> tuple[int, int]:
    """The item count of an array's or map's next block; a negative count is followed by
    the block's size in bytes, which a reader that reads every item does not need."""
    count, pos = _read_long(data, pos)
    if count < 0:
        _, pos = _read_long(data, pos)
        count = -count
    return count, pos


def _read_dates(data: bytes, pos: int) -> tuple[list[Any], int]:
    """An array of dates, its varints read inline: a spec's excluded days (up to a
    thousand) decoded item by item took an owner's poll 100-200 ms for a tenant's batch of
    such specs, which every other tenant's command waited; this is 2-3 times faster."""
    values: list[Any] = []
    append = values.append
    count, pos = _blocks(data, pos)
    while count:
        for _ in range(count):
            byte = data[pos]
            pos += 1
            n = byte & 0x7F
            shift = 7
            while byte & 0x80:
                byte = data[pos]
                pos += 1
                n |= (byte & 0x7F) << shift
                shift += 7
            append(_from_ordinal(_EPOCH_ORDINAL + ((n >> 1) ^ -(n & 1))))
        count, pos = _blocks(data, pos)
    return values, pos


def _array(items: ValueReader) -> ValueReader:
    if items is _read_date:
        return _read_dates

    def read(data: bytes, pos: int) -> tuple[list[Any], int]:
        values: list[Any] = []
        count, pos = _blocks(data, pos)
        while count:
            for _ in range(count):
                value, pos = items(data, pos)
                values.append(value)
            count, pos = _blocks(data, pos)
        return values, pos
    return read


def _map(values: ValueReader) -> ValueReader:
    def read(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        result: dict[str, Any] = {}
        count, pos = _blocks(data, pos)
        while count:
            for _ in range(count):
                key, pos = _read_string(data, pos)
                result[key], pos = values(data, pos)
            count, pos = _blocks(data, pos)
        return result, pos
    return read


def _record(fields: list[tuple[str, ValueReader]]) -> ValueReader:
    def read(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        record: dict[str, Any] = {}
        for name, reader in fields:
            record[name], pos = reader(data, pos)
        return record, pos
    return read


_PARTS = Parts(primitives=_PRIMITIVES, logical=_LOGICAL,
               union=lambda _branches, readers: _union(readers),
               record=lambda _name, fields: _record(fields), array=_array, map=_map)


def build_reader(schema: Mapping[str, Any]) -> ValueReader | None:
    """A reader of bodies written with this (unparsed, JSON) schema, or None when it uses a
    type the readers here do not cover."""
    return assemble(schema, _PARTS)
