"""What a handler hands the worker (its return value, a heartbeat's details) as bytes."""

from __future__ import annotations

import json

from cronlog.domain.bounds import MAX_PROGRESS_BYTES

# A heartbeat's details, at most: the attempt's progress, not its output. Longer details are
# cut to this many bytes (a heartbeat never fails its handler).
MAX_DETAILS_BYTES = MAX_PROGRESS_BYTES


def as_bytes(value: object) -> bytes:
    """Bytes as they are, text as UTF-8, None as nothing, anything else as compact JSON;
    TypeError or ValueError for a value JSON cannot hold."""
    if value is None:
        return b""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()

