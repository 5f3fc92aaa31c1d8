"""The CLI's `alerts list` (issue 37): what it asks the client for, an unknown outcome
refused by the parser, and its table."""

from __future__ import annotations

from typing import Any

import pytest

from cronlog.cli.alerts import alerts_command
from cronlog.cli.output import as_table
from cronlog.client.paging import Page
from cronlog.infra.entrypoints.cli import _parser
from cronlog.v1 import job_service_pb2 as pb

ATTEMPT = pb.AlertDeliveryAttempt(
    delivery_id="d-1", attempt=2, job_id="j-1", job_name="nightly", kind="dead_lettered",
    channel_name="ops-hook", channel_kind="webhook", outcome="retrying", status_code=503,
    latency_ms=84, error="HTTP 503", digest_count=3)
ATTEMPT.sent_at.FromSeconds(1_780_000_000)
ATTEMPT.next_attempt_at.FromSeconds(1_780_000_030)


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def list_alert_deliveries(self, *args: Any, **kwargs: Any
                              ) -> Page[pb.AlertDeliveryAttempt]:
        self.calls.append((args, kwargs))
        return Page((ATTEMPT,), "next")


def test_the_filters_reach_the_client() -> None:
    client = FakeClient()
    answer = alerts_command(client, _parser().parse_args([  # type: ignore[arg-type]
        "alerts", "list", "--tenant", "acme", "--job", "J", "--channel", "ops-hook",
        "--outcome", "failed", "--page-size", "7", "--page-token", "t"]))
    assert client.calls == [(("acme",), {"job_id": "J", "channel": "ops-hook",
                                         "outcome": "failed", "page_size": 7,
                                         "page_token": "t"})]
    assert isinstance(answer, pb.ListAlertDeliveriesResponse)
    assert answer.next_page_token == "next" and list(answer.attempts) == [ATTEMPT]


def test_an_unknown_outcome_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["alerts", "list", "--outcome", "exploded"])
    assert exited.value.code == 2
    assert "--outcome" in capsys.readouterr().err


def test_the_table_shows_each_attempt_and_the_next_page() -> None:
    shown = as_table(pb.ListAlertDeliveriesResponse(attempts=[ATTEMPT], next_page_token="n"))
    header, row = shown.splitlines()[:2]
    assert header.split()[:4] == ["SENT", "JOB", "KIND", "CHANNEL"]
    for cell in ("nightly", "dead_lettered (digest of 3)", "ops-hook (webhook)", "retrying",
                 "503", "84 ms", "HTTP 503", "2026-05-28 20:27:10Z"):
        assert cell in row
    assert shown.endswith("next page: --page-token n")
