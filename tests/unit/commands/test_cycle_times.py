from __future__ import annotations

from datetime import timedelta

from cronlog.commands.cycle_times import CycleTimes


def test_the_line_names_the_longest_steps_and_the_lookahead_left() -> None:
    times = CycleTimes(timedelta(seconds=2))
    assert times.report(now=0.0) is None, "the first call starts the interval"
    times.step("fire", stamped=1.0, committing=1.2, committed=1.3, applied=1.4, written=30)
    times.step("inbox", stamped=1.5, committing=1.6, committed=1.7, applied=1.9, written=4)
    times.step("fire", stamped=2.5, committing=2.6, committed=3.0, applied=3.1, written=90)
    assert times.report(now=5.0) is None, "not before the interval is over"
    reported = times.report(now=10.0)
    assert reported is not None
    ran_out, line = reported
    assert not ran_out
    assert "3 steps in the last 10 s" in line
    assert "longest gap between fire steps 1500 ms" in line
    assert "fire step 500 ms (decide 100, transaction 400, then apply 100; 90 messages)" in line
    assert "inbox step 200 ms (decide 100, transaction 100, then apply 200; 4 messages)" in line
    # A run that entered the window just after the first fire step was readable 2.0 s later.
    assert "least lookahead left at a commit 0 ms" in line


def test_a_warning_once_the_lookahead_ran_out_and_nothing_without_steps() -> None:
    times = CycleTimes(timedelta(seconds=1))
    times.report(now=0.0)
    times.step("fire", stamped=1.0, committing=1.0, committed=1.0, applied=1.0, written=0)
    times.step("fire", stamped=1.8, committing=1.9, committed=2.4, applied=2.5, written=10)
    reported = times.report(now=10.0)
    assert reported is not None and reported[0], "1.4 s from one stamp to the next commit"
    assert "least lookahead left at a commit -400 ms" in reported[1]
    assert times.report(now=20.0) is None, "counts restart; no steps, no line"
