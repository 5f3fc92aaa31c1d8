"""A list read's page in bytes (issue 33): the cut that ListRuns applies in Python and that
the Postgres statements apply in SQL (byte_pages) — at most page_size rows, the first always,
then while the running sum stays within the budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cronlog.infra.page_bytes import cut
from cronlog.infra.postgres.byte_pages import byte_bounded
from cronlog.infra.postgres.calendar_reads import LIST_CALENDARS, LIST_CALENDARS_AFTER
from cronlog.infra.postgres.job_queries import LIST_FILTERED, LIST_JOBS


def test_rows_are_kept_while_their_running_sum_fits() -> None:
    assert cut([100, 100, 100, 100], page_size=10, max_bytes=250) == 2
    assert cut([100, 100, 50], page_size=10, max_bytes=250) == 3
    assert cut([100, 100, 50, 1], page_size=10, max_bytes=250) == 3


def test_the_page_size_bounds_the_rows_whatever_their_size() -> None:
    assert cut([1] * 1001, page_size=1000, max_bytes=3 << 20) == 1000
    assert cut([1] * 10, page_size=1000, max_bytes=3 << 20) == 10
    assert cut([], page_size=1000, max_bytes=3 << 20) == 0


def test_a_row_over_the_budget_alone_is_returned_alone() -> None:
    assert cut([5 << 20, 1, 1], page_size=100, max_bytes=3 << 20) == 1
    assert cut([1, 5 << 20, 1], page_size=100, max_bytes=3 << 20) == 1


@given(st.lists(st.integers(0, 1 << 20), max_size=60), st.integers(1, 50),
       st.integers(1, 4 << 20))
def test_a_page_is_a_prefix_within_both_bounds(sizes: list[int], page_size: int,
                                               max_bytes: int) -> None:
    kept = cut(sizes, page_size, max_bytes)
    assert kept <= page_size and kept <= len(sizes)
    assert kept >= min(1, len(sizes))  # a page always moves the keyset on
    assert kept == 1 or sum(sizes[:kept]) <= max_bytes
    # Nothing that would have fit was left out.
    assert kept == min(len(sizes), page_size) or sum(sizes[:kept + 1]) > max_bytes


def test_every_list_statement_is_bounded_in_rows_and_bytes() -> None:
    for statement in (LIST_JOBS, LIST_FILTERED, LIST_CALENDARS, LIST_CALENDARS_AFTER):
        assert "LIMIT %(limit)s" in statement
        assert "%(max_bytes)s" in statement and "%(page_size)s" in statement
        assert "sum(bytes) OVER w" in statement
    assert "CASE WHEN kept THEN spec END" in LIST_JOBS
    assert "CASE WHEN kept THEN exclusions END" in LIST_CALENDARS


def test_the_window_keeps_the_candidates_order() -> None:
    sql = byte_bounded("SELECT a, b, 1 AS bytes FROM t ORDER BY a, b LIMIT 3", "a, b",
                       "a, CASE WHEN kept THEN b END")
    assert "WINDOW w AS (ORDER BY a, b ROWS UNBOUNDED PRECEDING)" in sql
    assert sql.rstrip().endswith("ORDER BY a, b")
