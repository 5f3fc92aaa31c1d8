"""The CLI's `dead-letters redrive` (issue 37 item 4): what it sends through the client, a
bad time refused before anything is sent, and its table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cronlog.cli.dead_letters import MORE_NOTE, dead_letters_command
from cronlog.cli.job_spec import UsageError
from cronlog.cli.output import as_table
from cronlog.infra.entrypoints.cli import _parser
from cronlog.v1 import job_service_pb2 as pb


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def redrive_dead_letters(self, *args: Any, **kwargs: Any) -> pb.RedriveDeadLettersResponse:
        self.calls.append((args, kwargs))
        return pb.RedriveDeadLettersResponse()


def sent(*argv: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    client = FakeClient()
    dead_letters_command(client, _parser().parse_args(["dead-letters", "redrive", *argv]))  # type: ignore[arg-type]
    [call] = client.calls
    return call


def test_the_window_job_tenant_limit_and_request_id_reach_the_client() -> None:
    args, kwargs = sent("--since", "2026-11-01T00:00:00+00:00", "--until",
                        "2026-11-02T00:00:00+01:00", "--job", "J", "--tenant", "acme",
                        "--limit", "7", "--request-id", "r1")
    assert args == (datetime(2026, 11, 1, tzinfo=UTC),
                    datetime(2026, 11, 1, 23, tzinfo=UTC))
    assert kwargs == {"tenant": "acme", "job_id": "J", "limit": 7, "request_id": "r1"}
    args, kwargs = sent("--since", "2026-11-01T00:00:00+00:00")
    assert args[1] is None and kwargs == {"tenant": "", "job_id": "", "limit": 0,
                                          "request_id": None}


@pytest.mark.parametrize(("argv", "option"), [
    (("--since", "yesterday"), "--since"),
    (("--since", "2026-11-01T00:00:00"), "--since"),
    (("--since", "2026-11-01T00:00:00Z", "--until", "soon"), "--until"),
])
def test_a_bad_time_is_refused_before_anything_is_sent(argv: tuple[str, ...],
                                                       option: str) -> None:
    client = FakeClient()
    with pytest.raises(UsageError, match=option):
        dead_letters_command(client, _parser().parse_args(["dead-letters", "redrive", *argv]))  # type: ignore[arg-type]
    assert client.calls == []


def test_the_table_shows_each_runs_outcome_and_says_when_more_remain() -> None:
    answer = pb.RedriveDeadLettersResponse(more=True, runs=[
        pb.RedrivenDeadLetter(run_id="r1", job_id="j", outcome=pb.REDRIVE_OUTCOME_REDRIVEN),
        pb.RedrivenDeadLetter(run_id="r2", job_id="j", outcome=pb.REDRIVE_OUTCOME_FAILED,
                              error=pb.ItemError(code="FAILED_PRECONDITION",
                                                 message="job deleted"))])
    answer.runs[0].scheduled_at.FromDatetime(datetime(2026, 11, 1, 3, tzinfo=UTC))
    shown = as_table(answer)
    lines = shown.splitlines()
    assert lines[0].split() == ["RUN", "ID", "JOB", "ID", "SCHEDULED", "OUTCOME", "ERROR"]
    assert "redriven" in lines[1] and "2026-11-01" in lines[1]
    assert "failed" in lines[2] and "FAILED_PRECONDITION: job deleted" in lines[2]
    assert shown.endswith(MORE_NOTE)
    assert MORE_NOTE not in as_table(pb.RedriveDeadLettersResponse())
