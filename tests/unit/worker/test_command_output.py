"""What the `command` handler keeps of a process's output: tails, as one bounded JSON."""

from __future__ import annotations

import json

from cronlog.worker import command_output
from cronlog.worker.command_output import TAIL_BYTES, Tail, render_output
from cronlog.worker.execution import MAX_OUTPUT_BYTES


def tail(*chunks: bytes, limit: int = TAIL_BYTES) -> Tail:
    kept = Tail(limit)
    for chunk in chunks:
        kept.add(chunk)
    return kept


def test_the_output_bound_is_the_workers() -> None:
    assert command_output.MAX_OUTPUT_BYTES == MAX_OUTPUT_BYTES


def test_a_tail_keeps_the_last_bytes_of_many_chunks() -> None:
    kept = tail(b"abc", b"defg", b"hij", limit=5)
    assert kept.text() == "fghij" and kept.dropped
    assert not tail(b"abc", limit=5).dropped


def test_a_cut_inside_a_character_leaves_no_broken_start() -> None:
    # "é" is two bytes; a cut after its first leaves a continuation byte in front.
    assert tail("aé".encode() + b"bc", limit=3).text() == "bc"
    # Bytes that are not UTF-8 show as replacement characters.
    assert tail(b"ok\xff\xfe").text() == "ok\ufffd\ufffd"


def test_the_output_is_json_naming_status_signal_and_both_streams() -> None:
    data = render_output(tail(b"hi\n"), tail(b"warn\n"), 3, None)
    assert json.loads(data) == {"exit_status": 3, "signal": None, "stdout": "hi\n",
                                "stderr": "warn\n", "stdout_truncated": False,
                                "stderr_truncated": False}
    assert json.loads(render_output(tail(), tail(), None, 9))["signal"] == 9


def test_two_full_tails_are_cut_to_fit_the_workers_bound_longer_first() -> None:
    data = render_output(tail(b"o" * 200_000), tail(b"e" * 1000), 0, None)
    assert len(data) <= MAX_OUTPUT_BYTES
    fields = json.loads(data)
    assert fields["stderr"] == "e" * 1000 and not fields["stderr_truncated"]
    assert fields["stdout_truncated"] and set(fields["stdout"]) == {"o"}
    assert len(data) > MAX_OUTPUT_BYTES - 64  # cut no more than it must


def test_characters_json_escapes_sixfold_still_fit() -> None:
    data = render_output(tail(b"\x01" * 100_000), tail(b"\x02" * 100_000), 1, None)
    assert len(data) <= MAX_OUTPUT_BYTES
    fields = json.loads(data)
    assert fields["stdout_truncated"] and fields["stderr_truncated"]
    assert fields["stdout"] and fields["stderr"]
