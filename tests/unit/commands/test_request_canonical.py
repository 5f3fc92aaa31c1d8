"""The request digest's canonical form (commands/owner/request_ids.py) takes its common
types by exact type first: for any value it must answer what the general rules answer."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from cronlog.commands.owner.request_ids import _canonical


class Colour(StrEnum):
    RED = "red"


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def reference(value: Any) -> Any:
    """The rules as they were written before the fast path, type by type."""
    if isinstance(value, Mapping):
        return {str(k): reference(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [reference(v) for v in value]
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return {"us": (moment - EPOCH) // (datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - EPOCH)}
    if isinstance(value, date):
        return {"day": value.isoformat()}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"hex": bytes(value).hex()}
    if isinstance(value, UUID):
        return str(value)
    return value


leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8),
    st.binary(max_size=8), st.builds(bytearray, st.binary(max_size=8)),
    st.datetimes(), st.datetimes(timezones=st.just(UTC)), st.dates(), st.uuids(),
    st.just(Colour.RED))
values = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.text(max_size=5), inner, max_size=4),
    st.dictionaries(st.text(max_size=5), inner, max_size=3).map(OrderedDict),
    st.dictionaries(st.integers(), inner, max_size=3)), max_leaves=20)


@given(values)
def test_the_fast_path_answers_as_the_general_rules(value: Any) -> None:
    assert _canonical(value) == reference(value)
