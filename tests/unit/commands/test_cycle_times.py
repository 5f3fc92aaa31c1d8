from __future__ import annotations

from datetime import timedelta

from cronlog.commands.owner.cycle_times import CycleTimes


class Monotonic:
    def __init__(self) -> None:
        self.at = 0.0

    def __call__(self) -> float:
        return self.at


def quick_cycle(times: CycleTimes, stamped: float) -> None:
    times.cycle(stamped, stamped, stamped, stamped, 0)


def idle(times: CycleTimes, since: float, until: float) -> None:
    """Quick cycles 100 ms apart, as an owner with nothing to do runs them."""
    for tenth in range(round(since * 10), round(until * 10) + 1):
        quick_cycle(times, tenth / 10)


def test_the_extra_lead_is_the_longest_loss_beyond_half_the_lookahead_capped() -> None:
    clock = Monotonic()
    times = CycleTimes(timedelta(seconds=2), monotonic=clock)
    times.report()
    assert times.extra() == timedelta(0)
    quick_cycle(times, 1.0)
    # 1.2 s after the last cycle read its clock, 0.6 s to its commit: 1.8 s lost, 0.8 s
    # of it beyond half the lookahead.
    times.cycle(2.2, 2.5, 2.8, 2.9, 40)
    assert times.extra() == timedelta(seconds=0.8)
    idle(times, 2.9, 10.0)
    assert times.extra() == timedelta(seconds=0.8), "the longest, not the last"
    clock.at = 10.0
    assert times.report() is not None
    idle(times, 10.1, 20.0)
    assert times.extra() == timedelta(seconds=0.8), "kept over the next interval"
    clock.at = 20.0
    times.report()
    idle(times, 20.1, 20.5)
    assert times.extra() == timedelta(0), "forgotten after two; quick cycles lose nothing"
    times.cycle(20.6, 20.7, 26.0, 26.1, 9)
    assert times.extra() == timedelta(seconds=4), "at most twice the lookahead"


def test_a_restart_does_not_count_the_pause_as_a_slow_cycle() -> None:
    times = CycleTimes(timedelta(seconds=2), monotonic=Monotonic())
    quick_cycle(times, 1.0)
    times.restart()
    quick_cycle(times, 60.0)
    assert times.extra() == timedelta(0)


def test_the_line_names_the_longest_cycle_and_the_lead_left() -> None:
    clock = Monotonic()
    times = CycleTimes(timedelta(seconds=2), monotonic=clock)
    assert times.report() is None, "the first call starts the interval"
    quick_cycle(times, 1.0)
    times.cycle(1.5, 1.6, 1.7, 1.9, 4)
    times.cycle(2.5, 2.6, 3.0, 3.1, 90)
    clock.at = 5.0
    assert times.report() is None, "not before the interval is over"
    clock.at = 10.0
    reported = times.report()
    assert reported is not None
    ran_out, line = reported
    assert not ran_out
    assert "3 cycles in the last 10 s" in line
    assert ("longest 500 ms to its commit (decide 100, transaction 400, then apply 100; "
            "90 messages)") in line
    assert "longest gap between cycles 1000 ms" in line
    # A run that entered the window just after the second cycle read the clock (which
    # fired with no extra lead) was readable 1.5 s later.
    assert "firing 500 ms further ahead than the lookahead" in line
    assert "least lead left at a commit 500 ms" in line


def test_a_warning_once_some_lead_ran_out_and_a_line_without_cycles() -> None:
    clock = Monotonic()
    times = CycleTimes(timedelta(seconds=1), monotonic=clock)
    times.report()
    quick_cycle(times, 1.0)
    times.cycle(2.8, 2.9, 3.4, 3.5, 10)
    clock.at = 10.0
    reported = times.report()
    assert reported is not None and reported[0], "2.4 s from one cycle's clock to the next commit"
    assert "least lead left at a commit -1400 ms" in reported[1]
    clock.at = 20.0
    reported = times.report()
    assert reported is not None and not reported[0]
    assert reported[1].startswith("0 cycles") and reported[1].endswith("at a commit -")
