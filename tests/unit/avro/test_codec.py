"""Invariant 8: every message round-trips, and stored samples of every schema version stay
readable by the current codec."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from cronlog.infra.avro.codec import (
    MARKER,
    AvroCodec,
    InvalidRecord,
    MalformedMessage,
    UnknownSchema,
)
from tests.unit.avro.examples import EXAMPLES

SAMPLES = Path(__file__).parent / "samples"
CODEC = AvroCodec()


def normalised(record: dict[str, object]) -> dict[str, object]:
    return {k: (str(v) if k.endswith("_id") and v is not None else v) for k, v in record.items()}


def holds(decoded: object, written: object, path: str = "") -> None:
    """decoded carries everything written; fields added by later versions hold defaults."""
    if isinstance(written, dict):
        assert isinstance(decoded, dict), path
        for key, value in written.items():
            holds(decoded[key], value, f"{path}.{key}")
        return
    if isinstance(written, list):
        assert isinstance(decoded, list) and len(decoded) == len(written), path
        for index, (got, item) in enumerate(zip(decoded, written, strict=True)):
            holds(got, item, f"{path}[{index}]")
        return
    assert normalised({"x": decoded}) == normalised({"x": written}), path


@pytest.mark.parametrize("name", CODEC.names())
def test_every_record_round_trips(name: str) -> None:
    newest = max(v for n, v in EXAMPLES if n == name)
    example = EXAMPLES[(name, newest)]
    data = CODEC.encode(name, example)
    assert data[:2] == MARKER
    decoded_name, decoded = CODEC.decode(data)
    assert decoded_name == name
    assert normalised(decoded) == normalised(example)


def test_every_schema_version_has_a_stored_sample_and_it_decodes() -> None:
    versions = CODEC.versions()
    assert versions
    for version in versions:
        sample = SAMPLES / f"{version.name}.v{version.version}.bin"
        assert sample.exists(), f"no stored sample for {sample.name}: run make_samples.py"
        name, record = CODEC.decode(sample.read_bytes())
        assert name == version.name
        holds(record, EXAMPLES[(version.name, version.version)], sample.name)


def test_a_job_spec_stored_before_spread_existed_reads_with_no_spread() -> None:
    from cronlog.infra.avro.event_mapping import spec_from_record

    _, record = CODEC.decode((SAMPLES / "JobCreated.v1.bin").read_bytes())
    assert record["spec"]["spread_ms"] == 0
    assert spec_from_record(record["spec"]).spread.total_seconds() == 0


def test_a_run_scheduled_before_it_carried_its_dispatch_reads_as_not_dispatched() -> None:
    # v1 RunScheduled events are always followed by their AttemptDispatched.
    _, record = CODEC.decode((SAMPLES / "RunScheduled.v1.bin").read_bytes())
    assert record["attempt"] == 0 and record["timeout_ms"] == 0
    _, record = CODEC.decode((SAMPLES / "RunScheduled.v2.bin").read_bytes())
    assert record["attempt"] == 1 and record["timeout_ms"] == 5000


def _fields(schema: object) -> dict[str, dict[str, object]]:
    assert isinstance(schema, dict)
    return {f["name"]: f for f in schema["fields"]}


def _compatible(old: object, new: object, path: str) -> list[str]:
    if isinstance(old, dict) and old.get("type") == "record":
        problems = []
        old_fields, new_fields = _fields(old), _fields(new)
        for name, field in new_fields.items():
            if name not in old_fields and "default" not in field:
                problems.append(f"{path}.{name}: added without a default")
        for name, field in old_fields.items():
            if name not in new_fields and "default" not in field:
                problems.append(f"{path}.{name}: removed but had no default")
            elif name in new_fields:
                problems += _compatible(field["type"], new_fields[name]["type"], f"{path}.{name}")
        return problems
    if old != new and not (isinstance(old, dict) or isinstance(new, dict)):
        promotions = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
                      ("long", "double"), ("float", "double"), ("string", "bytes"),
                      ("bytes", "string")}
        if (old, new) not in promotions:
            return [f"{path}: {old} -> {new} is not a promotion"]
    return []


def test_every_newer_schema_version_is_compatible_with_the_older_ones() -> None:
    by_name: dict[str, list[object]] = {}
    for version in CODEC.versions():
        by_name.setdefault(version.name, []).append(version.raw)
    evolved = 0
    for name, versions in by_name.items():
        for old, new in itertools.pairwise(versions):
            evolved += 1
            assert _compatible(old, new, name) == []
    assert evolved >= 4


def test_header_is_the_writer_schema_fingerprint() -> None:
    data = CODEC.encode("RunSucceeded", EXAMPLES[("RunSucceeded", 1)])
    version = next(v for v in CODEC.versions() if v.name == "RunSucceeded")
    assert data[2:10] == version.fingerprint


def test_errors_name_what_is_wrong() -> None:
    with pytest.raises(UnknownSchema, match="Nope"):
        CODEC.encode("Nope", {})
    with pytest.raises(InvalidRecord, match="RunSucceeded"):
        CODEC.encode("RunSucceeded", {"run_id": "x"})
    with pytest.raises(MalformedMessage):
        CODEC.decode(b"{json}")
    with pytest.raises(UnknownSchema, match="fingerprint"):
        CODEC.decode(MARKER + b"\x00" * 8 + b"\x00")
    good = CODEC.encode("RunFailed", EXAMPLES[("RunFailed", 1)])
    with pytest.raises(MalformedMessage):
        CODEC.decode(good[:12])


def test_the_compatibility_check_catches_breaking_changes() -> None:
    old = {"type": "record", "name": "X", "fields": [{"name": "a", "type": "long"}]}
    added = {"type": "record", "name": "X", "fields": [{"name": "a", "type": "long"},
                                                       {"name": "b", "type": "long"}]}
    narrowed = {"type": "record", "name": "X", "fields": [{"name": "a", "type": "int"}]}
    assert _compatible(old, added, "X") == ["X.b: added without a default"]
    assert _compatible(old, narrowed, "X") == ["X.a: long -> int is not a promotion"]
    assert _compatible(old, {"type": "record", "name": "X", "fields": []}, "X") == [
        "X.a: removed but had no default"]
