"""Avro binary bodies written by writers built once per schema.

fastavro interprets the schema for every record it writes, about half a microsecond per
field and more for logical types: RunScheduled took 13 µs, and the owner writes five such
records per run (a fifth of its CPU). A writer built from the schema ahead of time writes
the same bytes (Avro specification, "Binary Encoding"; tested against fastavro for every
shipped schema) in about half that.

Built for the types cronlog's schemas use: records, primitives, arrays, maps, unions and
the uuid and timestamp-micros logical types. A schema with anything else gets no writer
(`build_writer` returns None) and the codec keeps fastavro for it.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from typing import Any
from uuid import UUID
from weakref import WeakKeyDictionary

from cronlog.infra.avro.schema_walk import Parts, UnsupportedSchema, assemble

# Writes one value of a type to the end of a buffer.
ValueWriter = Callable[[Any, bytearray], None]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DAY = date(1970, 1, 1)
_DOUBLE = struct.Struct("<d")


class RecordMismatch(ValueError):
    """A value that does not fit its schema; the message names the field."""


def _varint(n: int, out: bytearray) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(low: int, high: int, kind: str) -> ValueWriter:
    """int and long share their encoding; only their ranges differ."""
    def write(value: int, out: bytearray) -> None:
        if not isinstance(value, int):
            raise TypeError(f"expected an integer, got {type(value).__name__}")
        if not low <= value <= high:
            raise ValueError(f"{value} is out of the range of {kind}")
        _varint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF, out)
    return write


_write_long = _zigzag(-(1 << 63), (1 << 63) - 1, "a long")
_write_int = _zigzag(-(1 << 31), (1 << 31) - 1, "an int")


def _write_string(value: str, out: bytearray) -> None:
    # A catalogue member (a StrEnum) is a string too.
    if type(value) is not str and not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    data = value.encode()
    _varint(len(data) << 1, out)
    out += data


def _write_bytes(value: bytes, out: bytearray) -> None:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError(f"expected bytes, got {type(value).__name__}")
    _varint(len(value) << 1, out)
    out += value


class _Encoded(dict[Any, bytes]):
    """Encoded fields of values that recur: a run's id goes into five messages, a job's into
    every message of its runs, and one cycle's records share a few timestamps. Emptied when
    full rather than kept in order: a miss only costs the encoding."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def write(self, value: Any, out: bytearray, encode: ValueWriter) -> None:
        encoded = self.get(value)
        if encoded is None:
            field = bytearray()
            encode(value, field)
            encoded = bytes(field)
            if len(self) >= self.limit:
                self.clear()
            self[value] = encoded
        out += encoded


_UUIDS = _Encoded(50_000)
_TIMESTAMPS = _Encoded(10_000)


def _write_uuid_text(value: UUID, out: bytearray) -> None:
    _write_string(str(value), out)


def _write_uuid(value: UUID | str, out: bytearray) -> None:
    if type(value) is UUID:
        _UUIDS.write(value, out, _write_uuid_text)
    else:
        _write_string(value, out)  # type: ignore[arg-type]


def _micros(value: datetime | int) -> int:
    if type(value) is datetime:
        if value.tzinfo is not None:
            delta = value - _EPOCH
            return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        # As fastavro reads a naive datetime: local time.
        return int(time.mktime(value.timetuple())) * 1_000_000 + value.microsecond
    return value  # type: ignore[return-value]


def _write_micros(value: datetime | int, out: bytearray) -> None:
    _write_long(_micros(value), out)


def _write_timestamp_micros(value: datetime | int, out: bytearray) -> None:
    if type(value) is datetime:
        _TIMESTAMPS.write(value, out, _write_micros)
    else:
        _write_long(value, out)


def _write_boolean(value: bool, out: bytearray) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"expected a boolean, got {type(value).__name__}")
    out.append(1 if value else 0)


def _write_double(value: float, out: bytearray) -> None:
    if not isinstance(value, float | int) or isinstance(value, bool):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    out += _DOUBLE.pack(value)


def _write_null(value: None, out: bytearray) -> None:
    if value is not None:
        raise TypeError(f"expected null, got {type(value).__name__}")


_PRIMITIVES: dict[str, ValueWriter] = {
    "null": _write_null, "boolean": _write_boolean, "int": _write_int, "long": _write_long,
    "double": _write_double, "string": _write_string, "bytes": _write_bytes,
}
def _write_date(value: date | int, out: bytearray) -> None:
    # Days since the epoch; calendars' excluded days (issue 20).
    _write_long((value - _EPOCH_DAY).days if isinstance(value, date) else value, out)


_LOGICAL: dict[tuple[str, str], ValueWriter] = {
    ("string", "uuid"): _write_uuid, ("long", "timestamp-micros"): _write_timestamp_micros,
    ("int", "date"): _write_date,
}


# The parts of each nullable writer, for the unrolled record writers to inline; weak, so
# the writers of a codec that is dropped go with it.
_NULLABLE_PARTS: WeakKeyDictionary[ValueWriter, tuple[ValueWriter, bytes, bytes]] = \
    WeakKeyDictionary()


def _nullable(writer: ValueWriter, null_index: int) -> ValueWriter:
    """A union of null and one other type, either way round."""
    null_byte, value_byte = (b"\x00", b"\x02") if null_index == 0 else (b"\x02", b"\x00")

    def write(value: Any, out: bytearray) -> None:
        if value is None:
            out += null_byte
        else:
            out += value_byte
            writer(value, out)
    _NULLABLE_PARTS[write] = (writer, null_byte, value_byte)
    return write


def _array(items: ValueWriter) -> ValueWriter:
    def write(value: Any, out: bytearray) -> None:
        if not isinstance(value, list | tuple):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        if value:
            _varint(len(value) << 1, out)
            for item in value:
                items(item, out)
        out.append(0)
    return write


def _map(values: ValueWriter) -> ValueWriter:
    def write(value: Any, out: bytearray) -> None:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected a mapping, got {type(value).__name__}")
        if value:
            _varint(len(value) << 1, out)
            for key, item in value.items():
                _write_string(key, out)
                values(item, out)
        out.append(0)
    return write


def _record(name: str, fields: list[tuple[str, ValueWriter]]) -> ValueWriter:
    names = frozenset(n for n, _ in fields)

    def checked(value: Any, out: bytearray) -> None:
        """Field by field, naming the field that does not fit."""
        for field, writer in fields:
            try:
                writer(value[field], out)
            except RecordMismatch:
                raise
            except KeyError:
                _mismatched_fields(name, names, value)
            except (TypeError, ValueError, AttributeError, OverflowError) as exc:
                raise RecordMismatch(f"{name}.{field}: {exc}") from exc

    unrolled = _unrolled(fields, checked)

    def write(value: Any, out: bytearray) -> None:
        if not isinstance(value, Mapping):
            raise TypeError(f"{name}: expected a record, got {type(value).__name__}")
        if len(value) != len(fields):
            _mismatched_fields(name, names, value)
        unrolled(value, out)
    return write


def _unrolled(fields: list[tuple[str, ValueWriter]],
              checked: Callable[[Any, bytearray], None]) -> Callable[[Any, bytearray], None]:
    """The record's fields written by straight-line code generated for the schema: no loop,
    the null unions and the remembered ids and timestamps inline. A record this code cannot
    write (any exception) is written again by `checked`, which raises the error naming the
    field, so what is refused and how is exactly as field by field; the bytes of a record
    that fits are the same (the same writers, in the same order)."""
    namespace: dict[str, Any] = {"checked": checked, "UUID": UUID, "datetime": datetime,
                                 "uuids": _UUIDS.get, "timestamps": _TIMESTAMPS.get,
                                 "write_uuid": _write_uuid,
                                 "write_timestamp": _write_timestamp_micros,
                                 "varint": _varint}
    lines = ["def unrolled(value, out):", "    try:"]
    for n, (field, writer) in enumerate(fields):
        lines.append(f"        v = value[{field!r}]")
        indent = "        "
        parts = _NULLABLE_PARTS.get(writer)
        if parts is not None:
            writer, null_byte, value_byte = parts
            namespace[f"null{n}"], namespace[f"value{n}"] = null_byte, value_byte
            lines += [f"{indent}if v is None:", f"{indent}    out += null{n}",
                     f"{indent}else:", f"{indent}    out += value{n}"]
            indent += "    "
        if writer is _write_uuid or writer is _write_timestamp_micros:
            kind, known, write = (("UUID", "uuids", "write_uuid") if writer is _write_uuid
                                  else ("datetime", "timestamps", "write_timestamp"))
            lines += [f"{indent}e = {known}(v) if type(v) is {kind} else None",
                     f"{indent}if e is None:", f"{indent}    {write}(v, out)",
                     f"{indent}else:", f"{indent}    out += e"]
        elif writer is _write_long or writer is _write_int:
            # The common case inline (a call per field was a tenth of a record): an int in
            # range; anything else (a bool, a value out of range, not an int) goes through
            # the writer, which writes or refuses it as field by field.
            namespace[f"w{n}"] = writer
            low, high = ((-(1 << 63), (1 << 63) - 1) if writer is _write_long
                         else (-(1 << 31), (1 << 31) - 1))
            lines += [f"{indent}if type(v) is int and {low} <= v <= {high}:",
                      f"{indent}    z = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF",
                      f"{indent}    if z < 0x80:", f"{indent}        out.append(z)",
                      f"{indent}    else:", f"{indent}        varint(z, out)",
                      f"{indent}else:", f"{indent}    w{n}(v, out)"]
        elif writer is _write_string:
            namespace[f"w{n}"] = writer
            lines += [f"{indent}if type(v) is str:", f"{indent}    d = v.encode()",
                      f"{indent}    z = len(d) << 1",
                      f"{indent}    if z < 0x80:", f"{indent}        out.append(z)",
                      f"{indent}    else:", f"{indent}        varint(z, out)",
                      f"{indent}    out += d",
                      f"{indent}else:", f"{indent}    w{n}(v, out)"]
        else:
            namespace[f"w{n}"] = writer
            lines.append(f"{indent}w{n}(v, out)")
    lines += ["    except Exception:",
              "        checked(value, bytearray())",
              "        raise"]
    if not fields:
        lines[1:] = ["    pass"]
    # Generated from the shipped schemas only: field names are written as literals (repr).
    exec("\n".join(lines), namespace)
    unrolled: Callable[[Any, bytearray], None] = namespace["unrolled"]
    return unrolled


def _mismatched_fields(name: str, names: frozenset[str], value: Mapping[str, Any]) -> None:
    """Exactly the schema's fields, as fastavro's strict mode asks: a field the schema lacks
    would otherwise be dropped without a word."""
    missing, extra = sorted(names - set(value)), sorted(set(value) - names)
    raise RecordMismatch(f"{name}: missing fields {missing}, fields not in the schema {extra}")


def _union(branches: list[Any], writers: list[ValueWriter]) -> ValueWriter:
    if len(branches) == 2 and "null" in branches:
        index = branches.index("null")
        return _nullable(writers[1 - index], index)
    raise UnsupportedSchema(f"union {branches!r}")


_PARTS = Parts(primitives=_PRIMITIVES, logical=_LOGICAL, union=_union, record=_record,
               array=_array, map=_map)


def build_writer(schema: Mapping[str, Any]) -> ValueWriter | None:
    """A writer of records of this (unparsed, JSON) schema, or None when it uses a type
    the writers here do not cover."""
    return assemble(schema, _PARTS)
