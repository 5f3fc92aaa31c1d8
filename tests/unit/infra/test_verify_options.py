"""`cronlog verify`'s options: each wrong one refused naming it, before the log is read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronlog.cli.job_spec import UsageError
from cronlog.infra.entrypoints.verify import DEFAULT_SETTLE, request_from
from cronlog.verification.window import InvalidWindow

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)


def test_the_window_ends_now_and_what_settled_is_ten_minutes_back_by_default() -> None:
    request = request_from("2026-12-06T00:00:00+00:00", None, None, "", ["j"], None, NOW)
    assert request.window.since == datetime(2026, 12, 6, tzinfo=UTC)
    assert request.window.until == NOW
    assert request.settled_before == NOW - DEFAULT_SETTLE == NOW - timedelta(minutes=10)
    assert request.tenant is None and request.job_ids == ("j",)
    settled = request_from("2026-12-06T00:00:00+00:00", "2026-12-06T06:00:00+01:00", "30s",
                           "billing", [], "-", NOW)
    assert settled.window.until == datetime(2026, 12, 6, 5, tzinfo=UTC)
    assert settled.settled_before == NOW - timedelta(seconds=30)
    assert settled.tenant == "billing" and settled.report == "-"


@pytest.mark.parametrize(("since", "until", "settle", "error"), [
    ("yesterday", None, None, "--since: 'yesterday' is not an ISO-8601 instant"),
    ("2026-12-06T00:00:00", None, None, "--since: '2026-12-06T00:00:00' needs an offset"),
    ("2026-12-06T00:00:00Z", "2026-12-07T00:00:00Z", None, "--until: 2026-12-07T00:00:00+00:00 "
                                                           "is in the future"),
    ("2026-12-06T00:00:00Z", None, "soon", "--settle: 'soon' is not a duration"),
    ("2026-12-06T13:00:00+01:00", "2026-12-06T12:00:00Z", None, "--until: "),
    ("2026-08-01T00:00:00Z", None, None, "--since: a window of at most 92 days"),
])
def test_a_wrong_option_is_named(since: str, until: str | None, settle: str | None,
                                 error: str) -> None:
    with pytest.raises((UsageError, InvalidWindow)) as refused:
        request_from(since, until, settle, None, [], None, NOW)
    assert str(refused.value).startswith(error)
