"""Runs with large outputs come back in responses every gRPC client takes (≤ 4 MiB)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from cronlog.infra.grpc.response_size import MAX_RESPONSE_BYTES, bounded_page, bounded_run
from cronlog.v1 import job_service_pb2 as pb

BIG = b"x" * (64 * 1024)


def run_out(rows: list[Any]) -> pb.Run:
    row = rows[0]
    return pb.Run(run_id=row.run_id, attempts=[
        pb.Attempt(number=n, output=BIG, error="E: " + "e" * 30_000) for n in range(1, row.n + 1)])


def rows(count: int, attempts: int = 1) -> list[list[Any]]:
    return [[SimpleNamespace(run_id=f"r{i}", scheduled_at_us=i, n=attempts)]
            for i in range(count)]


def test_a_page_stops_before_the_response_limit_and_points_after_its_last_run() -> None:
    page, token = bounded_page(rows(120), run_out, lambda last: f"after {last.run_id}", "next")
    assert 0 < len(page) < 120
    assert sum(r.ByteSize() for r in page) <= MAX_RESPONSE_BYTES
    assert token == f"after {page[-1].run_id}"


def test_a_page_that_fits_keeps_the_stores_token() -> None:
    page, token = bounded_page(rows(3), run_out, lambda last: "never", None)
    assert [r.run_id for r in page] == ["r0", "r1", "r2"] and token is None


def test_one_huge_run_keeps_its_last_output_and_marks_the_others_truncated() -> None:
    run = bounded_run(run_out(rows(1, attempts=60)[0]))
    assert run.ByteSize() < 4 * 1024 * 1024
    assert run.attempts[-1].output == BIG and not run.attempts[-1].output_truncated
    assert all(a.output == b"" and a.output_truncated for a in run.attempts[:-1])
    assert len(run.attempts) == 60
