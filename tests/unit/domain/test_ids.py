"""Deterministic ids: the run and job ids cronlog has handed out must never change."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from cronlog.domain.ids import (
    JOB_NAMESPACE,
    job_id_for_request,
    run_id_for,
    uuid5,
)


@given(namespace=st.uuids(), name=st.text(max_size=300))
def test_uuid5_is_the_standard_librarys(namespace: UUID, name: str) -> None:
    ours = uuid5(namespace, name)
    theirs = uuid.uuid5(namespace, name)
    assert ours == theirs
    assert (ours.version, ours.variant) == (5, uuid.RFC_4122)
    assert str(ours) == str(theirs) and hash(ours) == hash(theirs)


def test_ids_are_those_handed_out_before() -> None:
    # Taken with the standard library's uuid5, before cronlog had its own.
    job_id = job_id_for_request("acme", "import-1")
    assert str(job_id) == "a569f55f-92c3-57fe-8a03-b95d97689dc5"
    assert job_id == uuid.uuid5(JOB_NAMESPACE, "acme\x00import-1")
    at = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
    assert str(run_id_for(job_id, at)) == "517551e9-e196-52c9-bbcf-905716a3bc8f"
    # The same instant in another zone is the same fire time.
    local = at.astimezone(timezone(timedelta(hours=2)))
    assert run_id_for(job_id, local) == run_id_for(job_id, at)
