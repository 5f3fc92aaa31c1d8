"""Invariant 8: every message round-trips, and stored samples of every schema version stay
readable by the current codec."""

from __future__ import annotations

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
        expected = EXAMPLES[(version.name, version.version)]
        for key, value in expected.items():
            assert normalised({key: record[key]}) == normalised({key: value}), (name, key)


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
