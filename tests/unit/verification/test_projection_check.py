"""The state store's job rows against what the log implies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronlog.verification.findings import Check
from cronlog.verification.projection_check import JobState, compare_job_rows

T = datetime(2026, 12, 6, 12, tzinfo=UTC)
LOG = JobState(7, "active", T + timedelta(hours=1), T)


def test_an_equal_or_newer_row_holds_and_a_changed_one_is_named() -> None:
    expected = {"j": ("t", LOG)}
    assert compare_job_rows(expected, {"j": LOG}) == []
    newer = JobState(8, "paused", None, T)
    assert compare_job_rows(expected, {"j": newer}) == []
    changed = JobState(7, "active", T + timedelta(hours=2), T)
    [found] = compare_job_rows(expected, {"j": changed})
    assert (found.check, found.job_id, found.tenant) == (Check.PROJECTION_DIFFERS, "j", "t")
    assert found.detail == ("the state store's row differs from the job's events: "
                            "next_fire_at 2026-12-06T14:00:00+00:00 where the log gives "
                            "2026-12-06T13:00:00+00:00")


def test_a_row_behind_or_missing_is_named() -> None:
    behind = JobState(6, "active", T, T - timedelta(hours=1))
    [found] = compare_job_rows({"j": ("t", LOG)}, {"j": behind})
    assert "version 6 where the log gives 7" in found.detail
    [missing] = compare_job_rows({"j": ("t", LOG)}, {})
    assert missing.detail == "the state store has no row of the job"
