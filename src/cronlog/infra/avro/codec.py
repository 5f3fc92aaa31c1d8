"""AvroCodec: every cronlog message as an Avro record in single-object encoding.

Layout (Avro specification, "Single-object encoding"): the marker C3 01, the writer schema's
8-byte CRC-64-AVRO fingerprint (little-endian), then the Avro binary body. A reader finds
the writer schema by fingerprint among every version it ships and resolves it against the
newest version of the same record, so old stored events keep their meaning (invariant 8).
"""

from __future__ import annotations

import functools
import importlib.resources
import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from cronlog.infra.avro.record_reader import build_reader
from cronlog.infra.avro.record_writer import RecordMismatch, build_writer

MARKER = b"\xc3\x01"
HEADER_SIZE = 10
_FILE = re.compile(r"(?P<name>[A-Za-z]+)\.v(?P<version>\d+)\.avsc")


class CodecError(ValueError):
    """Base of the codec's errors."""


class MalformedMessage(CodecError):
    """Bytes that are not a single-object encoded Avro record cronlog can read."""


class UnknownSchema(CodecError):
    """A record name or writer fingerprint this codec does not ship."""


class InvalidRecord(CodecError):
    """A record does not fit its schema."""


@dataclass(frozen=True)
class SchemaVersion:
    name: str
    version: int
    schema: Any  # fastavro's parsed schema
    fingerprint: bytes
    raw: Mapping[str, Any]
    # The body's prebuilt writer; None where fastavro writes it (see record_writer).
    body_writer: Callable[[Mapping[str, Any], bytearray], None] | None = None
    # Reads bodies written with this very version (see record_reader).
    body_reader: Callable[[bytes, int], tuple[Any, int]] | None = None


@functools.cache
def shipped_schema_versions() -> tuple[SchemaVersion, ...]:
    """Every shipped schema version, loaded and its writer and reader built once per
    process: 0.23 s of CPU on the machine of docs/benchmarks.md, which every AvroCodec paid
    again (a role builds several, the tests hundreds). The versions are immutable and their
    writers and readers pure (the reader's remembered UUIDs are immutable values), so
    every codec of the process shares them."""
    return tuple(load_schema_versions())


def load_schema_versions() -> list[SchemaVersion]:
    folder = importlib.resources.files("cronlog.infra.avro").joinpath("schemas")
    versions: list[SchemaVersion] = []
    for entry in folder.iterdir():
        match = _FILE.fullmatch(entry.name)
        if match is None:
            continue
        raw = json.loads(entry.read_text())
        if raw.get("name") != match["name"]:
            raise UnknownSchema(f"{entry.name} defines record {raw.get('name')!r}")
        canonical = to_parsing_canonical_form(raw)
        versions.append(SchemaVersion(
            name=match["name"], version=int(match["version"]),
            schema=fastavro.parse_schema(raw, _write_hint=False),
            fingerprint=bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO")), raw=raw,
            body_writer=build_writer(raw), body_reader=build_reader(raw),
        ))
    return versions


class AvroCodec:
    def __init__(self) -> None:
        versions = shipped_schema_versions()
        self._by_fingerprint = {v.fingerprint: v for v in versions}
        self._newest: dict[str, SchemaVersion] = {}
        for v in sorted(versions, key=lambda v: v.version):
            self._newest[v.name] = v

    def names(self) -> list[str]:
        return sorted(self._newest)

    def versions(self) -> list[SchemaVersion]:
        return sorted(self._by_fingerprint.values(), key=lambda v: (v.name, v.version))

    def encode(self, name: str, record: Mapping[str, Any]) -> bytes:
        writer = self._newest.get(name)
        if writer is None:
            raise UnknownSchema(f"no schema for record {name!r}")
        return self.encode_with(writer, record)

    def encode_with(self, writer: SchemaVersion, record: Mapping[str, Any]) -> bytes:
        if writer.body_writer is not None:
            out = bytearray(MARKER)
            out += writer.fingerprint
            try:
                writer.body_writer(record, out)
            except RecordMismatch as exc:
                raise InvalidRecord(str(exc)) from exc
            return bytes(out)
        buffer = io.BytesIO()
        buffer.write(MARKER)
        buffer.write(writer.fingerprint)
        try:
            fastavro.schemaless_writer(buffer, writer.schema, dict(record), strict=True)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise InvalidRecord(f"{writer.name}: {exc}") from exc
        return buffer.getvalue()

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]:
        if len(data) < HEADER_SIZE or data[:2] != MARKER:
            raise MalformedMessage(
                f"not a single-object encoded Avro record (starts {data[:2].hex() or 'empty'})")
        writer = self._by_fingerprint.get(data[2:HEADER_SIZE])
        if writer is None:
            raise UnknownSchema(f"unknown writer schema fingerprint {data[2:HEADER_SIZE].hex()}")
        reader = self._newest[writer.name]
        try:
            if reader is writer and writer.body_reader is not None:
                body, _ = writer.body_reader(data, HEADER_SIZE)
                return writer.name, body
            # Resolving a schema against itself is a no-op that still costs a third of a
            # decode: only older writers are resolved against the newest version.
            record = fastavro.schemaless_reader(io.BytesIO(data[HEADER_SIZE:]), writer.schema,
                                                reader.schema if reader is not writer else None)
        except (EOFError, ValueError, IndexError, UnicodeDecodeError, TypeError,
                OverflowError) as exc:
            raise MalformedMessage(f"{writer.name} v{writer.version}: body unreadable: {exc}") \
                from exc
        if not isinstance(record, dict):
            raise MalformedMessage(f"{writer.name}: body is not a record")
        return writer.name, record
