"""Writes one encoded sample per schema version. Run by hand when a schema version is added;
existing samples are never rewritten, so they keep proving old events stay readable."""

from __future__ import annotations

from pathlib import Path

from cronlog.infra.avro.codec import AvroCodec
from tests.unit.avro.examples import EXAMPLES

SAMPLES = Path(__file__).parent / "samples"


def main() -> None:
    codec = AvroCodec()
    for version in codec.versions():
        path = SAMPLES / f"{version.name}.v{version.version}.bin"
        if path.exists():
            continue
        path.write_bytes(codec.encode_with(version, EXAMPLES[(version.name, version.version)]))
        print("wrote", path.name)


if __name__ == "__main__":
    main()
