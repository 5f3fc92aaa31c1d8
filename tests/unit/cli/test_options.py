"""The CLI's client options: where they may stand, and what `jobs update` sends."""

from __future__ import annotations

import pytest

from cronlog.cli.job_spec import update_request
from cronlog.infra.entrypoints.cli import _parser
from cronlog.v1 import job_service_pb2 as pb

JOB_ID = "0b9c4f1e-3a52-5d0e-9a8e-2f4a7c1d6b30"


@pytest.mark.parametrize("argv", [
    ["--address", "h:1", "-o", "table", "jobs", "list", "--tenant", "t"],
    ["jobs", "list", "--tenant", "t", "--address", "h:1", "--output", "table"],
    ["jobs", "--address", "h:1", "list", "-o", "table", "--tenant", "t"],
    ["--address", "elsewhere:9", "jobs", "list", "--tenant", "t", "--address", "h:1", "-o",
     "table"],
])
def test_client_options_are_taken_before_or_after_the_subcommand(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    assert (args.address, args.output_format, args.tenant) == ("h:1", "table", "t")


@pytest.mark.parametrize("argv", [["runs", "get", "r"], ["preview", "* * * * *"],
                                  ["jobs", "update", JOB_ID], ["jobs", "get", JOB_ID]])
def test_a_subcommand_keeps_what_was_given_before_it(argv: list[str]) -> None:
    """A subcommand's own default must not overwrite the value given before it."""
    args = _parser().parse_args(["--address", "h:1", "-o", "table", *argv])
    assert (args.address, args.output_format) == ("h:1", "table")
    default = _parser().parse_args([*argv, "--address", "h:2"])
    assert (default.address, default.output_format) == ("h:2", "json")


def test_the_address_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRONLOG_GRPC_ADDRESS", "env:7")
    assert _parser().parse_args(["jobs", "list"]).address == "env:7"
    monkeypatch.delenv("CRONLOG_GRPC_ADDRESS")
    assert _parser().parse_args(["jobs", "list"]).address == "127.0.0.1:50051"


def test_an_unknown_output_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["jobs", "list", "-o", "yaml"])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--output" in captured.err


def _current(version: int) -> pb.Job:
    return pb.Job(job_id=JOB_ID, version=version, spec=pb.JobSpec(
        name="n", tenant="t", handler="echo", cron="* * * * *", payload=b"v1",
        labels={"team": "data"}))


def test_an_update_carries_the_version_it_read() -> None:
    """Two people updating at once: the second write, made on what it read before the first
    landed, must be refused by the api, not overwrite the first (it once sent 0: any)."""
    args = _parser().parse_args(["jobs", "update", JOB_ID, "--payload", "v2"])
    request = update_request(args, _current(7))
    assert request.expected_version == 7
    assert request.spec.payload == b"v2" and dict(request.spec.labels) == {"team": "data"}


@pytest.mark.parametrize("given", [3, 0])
def test_an_expected_version_given_is_sent_as_given(given: int) -> None:
    args = _parser().parse_args(["jobs", "update", JOB_ID, "--expected-version", str(given)])
    assert update_request(args, _current(7)).expected_version == given
