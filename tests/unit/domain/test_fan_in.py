"""Fan-in: one dependent run per logical time whatever order and however often the upstream
ends come; missed with the upstreams named when the window passes; bounded memory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.domain.dependency import (
    MAX_CHAIN_DEPTH,
    ChainSlot,
    Dependency,
    DependencyCondition,
    UpstreamEnd,
    dependent_run_id,
)
from cronlog.domain.fan_in import DependentRun, FanIn, Folded
from cronlog.domain.ids import run_id_for
from cronlog.domain.run_states import CANCELLED, DEAD_LETTERED, MISSED, SKIPPED, SUCCEEDED
from tests.support.examples import examples

B = UUID(int=0xB)
A1, A2, A3 = (UUID(int=n) for n in (0xA1, 0xA2, 0xA3))
T = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 1, 2, 5, tzinfo=UTC)
HOUR = timedelta(hours=1)


def end(upstream: UUID, at: datetime = T, status: str = SUCCEEDED, cascade: str = "",
        depth: int = 0) -> UpstreamEnd:
    return UpstreamEnd(upstream, run_id_for(upstream, at), status, ChainSlot(at, cascade), depth)


def fan_in(*upstreams: UUID, condition: DependencyCondition = DependencyCondition.ON_SUCCESS,
           window: timedelta = HOUR, **limits: int) -> FanIn:
    return FanIn(B, Dependency(tuple(sorted(upstreams)), condition, window), **limits)


def test_one_upstream_decides_at_once_with_the_upstream_fire_time_as_logical_time() -> None:
    fold = fan_in(A1).record(end(A1), NOW)
    assert fold.folded is Folded.DECIDED and fold.recorded
    (run,) = fold.decisions
    assert run.runs and run.logical_time == T and run.depth == 1
    assert run.upstream_run_ids == (run_id_for(A1, T),)
    assert run.run_id == dependent_run_id(B, [run_id_for(A1, T)])


def test_three_upstreams_meet_in_any_order_and_run_once() -> None:
    state = fan_in(A1, A2, A3)
    assert state.record(end(A3), NOW).folded is Folded.WAITING
    assert state.waiting() == {ChainSlot(T): (A1, A2)}
    assert state.record(end(A1), NOW).folded is Folded.WAITING
    fold = state.record(end(A2), NOW)
    assert fold.folded is Folded.DECIDED
    (run,) = fold.decisions
    assert run.upstream_run_ids == tuple(sorted(run_id_for(a, T) for a in (A1, A2, A3)))
    assert state.waiting() == {}


def test_a_redelivered_end_writes_nothing_before_or_after_its_time_is_decided() -> None:
    state = fan_in(A1, A2)
    state.record(end(A1), NOW)
    again = state.record(end(A1), NOW)
    assert again.folded is Folded.DUPLICATE and not again.recorded and not again.decisions
    assert state.record(end(A2), NOW).decisions
    for upstream in (A1, A2):
        assert state.record(end(upstream), NOW + timedelta(minutes=1)).folded is Folded.DUPLICATE


def test_logical_times_are_kept_apart_and_out_of_order_ends_meet_their_own() -> None:
    later = T + HOUR
    state = fan_in(A1, A2)
    state.record(end(A1, later), NOW)
    state.record(end(A1, T), NOW)
    (first,) = state.record(end(A2, T), NOW).decisions
    (second,) = state.record(end(A2, later), NOW).decisions
    assert (first.logical_time, second.logical_time) == (T, later)


def test_a_cascade_is_a_chain_of_its_own_beside_the_scheduled_one() -> None:
    state = fan_in(A1)
    scheduled = state.record(end(A1), NOW).decisions
    backfilled = state.record(end(A1, cascade="backfill-7"), NOW).decisions
    assert len(scheduled) == len(backfilled) == 1
    assert scheduled[0].slot != backfilled[0].slot


def test_an_end_that_does_not_meet_the_condition_closes_its_time_without_a_run() -> None:
    state = fan_in(A1, A2)
    state.record(end(A1), NOW)
    fold = state.record(end(A2, status=DEAD_LETTERED), NOW)
    assert fold.folded is Folded.CLOSED and fold.recorded and not fold.decisions
    assert fold.reason is not None and str(A2) in fold.reason and "dead_lettered" in fold.reason
    assert state.waiting() == {}
    assert state.record(end(A1), NOW).folded is Folded.DUPLICATE


def test_on_failure_and_on_any() -> None:
    on_failure = fan_in(A1, condition=DependencyCondition.ON_FAILURE)
    assert on_failure.record(end(A1), NOW).folded is Folded.CLOSED
    assert on_failure.record(end(A1, T + HOUR, DEAD_LETTERED), NOW).decisions
    on_any = fan_in(A1, condition=DependencyCondition.ON_ANY)
    assert on_any.record(end(A1, status=CANCELLED), NOW).decisions
    assert on_any.record(end(A1, T + HOUR, SKIPPED), NOW).folded is Folded.CLOSED
    assert on_any.record(end(A1, T + 2 * HOUR, MISSED), NOW).folded is Folded.CLOSED


def test_the_window_passes_and_the_run_is_missed_naming_the_upstreams_that_never_came() -> None:
    state = fan_in(A1, A2, A3, window=HOUR)
    state.record(end(A2), NOW)
    assert state.next_deadline() == NOW + HOUR
    assert state.expire(NOW + HOUR - timedelta(microseconds=1)) == ()
    (run,) = state.expire(NOW + HOUR)
    assert not run.runs and run.missed_reason is not None
    assert str(A1) in run.missed_reason and str(A3) in run.missed_reason
    assert str(A2) not in run.missed_reason and "3600s" in run.missed_reason
    assert run.upstream_run_ids == (run_id_for(A2, T),)
    assert run.run_id == dependent_run_id(B, [run_id_for(A2, T)])
    assert state.next_deadline() is None


def test_an_end_recorded_after_its_deadline_is_late_even_if_expire_was_not_called() -> None:
    state = fan_in(A1, A2)
    state.record(end(A1), NOW)
    fold = state.record(end(A2), NOW + HOUR)
    assert fold.folded is Folded.LATE and not fold.recorded
    (missed,) = fold.decisions
    assert missed.missed_reason is not None and str(A2) in missed.missed_reason


def test_waiting_logical_times_are_bounded_and_the_oldest_gives_way_as_a_missed_run() -> None:
    state = fan_in(A1, A2, max_waiting=3)
    for hours in range(3):
        state.record(end(A1, T + hours * HOUR), NOW + timedelta(seconds=hours))
    fold = state.record(end(A1, T + 3 * HOUR), NOW + timedelta(seconds=3))
    assert fold.folded is Folded.WAITING
    (evicted,) = fold.decisions
    assert evicted.logical_time == T and evicted.missed_reason is not None
    assert "more than 3" in evicted.missed_reason
    assert len(state.waiting()) == 3


def test_settled_times_are_forgotten_after_a_window_or_beyond_the_limit() -> None:
    state = fan_in(A1, max_settled=2)
    for hours in range(3):
        state.record(end(A1, T + hours * HOUR), NOW)
    # The oldest settled time was let go: its end would be folded again.
    assert state.record(end(A1, T + 2 * HOUR), NOW).folded is Folded.DUPLICATE
    assert state.record(end(A1, T), NOW).folded is Folded.DECIDED
    state = fan_in(A1)
    state.record(end(A1), NOW)
    assert state.record(end(A1), NOW + HOUR - timedelta(seconds=1)).folded is Folded.DUPLICATE
    assert state.record(end(A1), NOW + HOUR).folded is Folded.DECIDED


def test_a_chain_deeper_than_the_bound_is_stopped_as_a_missed_run() -> None:
    state = fan_in(A1, A2)
    state.record(end(A1, depth=3), NOW)
    (run,) = state.record(end(A2, depth=MAX_CHAIN_DEPTH), NOW).decisions
    assert run.missed_reason is not None and "cycle" in run.missed_reason
    assert run.depth == MAX_CHAIN_DEPTH
    (deepest,) = fan_in(A1).record(end(A1, depth=MAX_CHAIN_DEPTH - 1), NOW).decisions
    assert deepest.runs and deepest.depth == MAX_CHAIN_DEPTH


def test_stray_and_conflicting_ends_change_nothing() -> None:
    state = fan_in(A1, A2)
    assert state.record(end(A3), NOW).folded is Folded.STRAY
    state.record(end(A1), NOW)
    other_run = UpstreamEnd(A1, UUID(int=99), SUCCEEDED, ChainSlot(T))
    assert state.record(other_run, NOW).folded is Folded.CONFLICTING
    (run,) = state.record(end(A2), NOW).decisions
    assert UUID(int=99) not in run.upstream_run_ids


def test_retarget_lets_go_of_removed_upstreams_and_decides_what_is_now_complete() -> None:
    state = fan_in(A1, A2, A3)
    state.record(end(A1), NOW)
    state.record(end(A3, T + HOUR), NOW)
    (run,) = state.retarget(Dependency((A1,)), NOW)
    assert run.runs and run.upstream_run_ids == (run_id_for(A1, T),)
    assert state.waiting() == {}


def decisions_of(state: FanIn, ends: list[UpstreamEnd], now: datetime) -> set[DependentRun]:
    made: list[DependentRun] = []
    for upstream_end in ends:
        made.extend(state.record(upstream_end, now).decisions)
    made.extend(state.expire(now + 2 * HOUR))
    assert len({run.slot for run in made}) == len(made), "two dependent runs for one time"
    return set(made)


UPSTREAMS = (A1, A2, A3)
# One run of each upstream per logical time and chain, ending once: its status is fixed.
ENDS = st.dictionaries(
    st.tuples(st.sampled_from(UPSTREAMS), st.sampled_from([T + n * HOUR for n in range(4)]),
              st.sampled_from(["", "trigger-1"])),
    st.sampled_from([SUCCEEDED, SUCCEEDED, SUCCEEDED, DEAD_LETTERED, SKIPPED]),
    max_size=24,
).map(lambda ends: [end(u, t, status, cascade) for (u, t, cascade), status in ends.items()])


@settings(max_examples=examples(300), deadline=None)
@given(ends=ENDS, data=st.data())
def test_any_interleaving_and_duplication_of_ends_makes_the_same_dependent_runs(
        ends: list[UpstreamEnd], data: st.DataObject) -> None:
    expected = decisions_of(fan_in(*UPSTREAMS), ends, NOW)
    repeated = data.draw(st.lists(st.sampled_from(ends), max_size=20)) if ends else []
    interleaved = data.draw(st.permutations([*ends, *repeated]))
    assert decisions_of(fan_in(*UPSTREAMS), list(interleaved), NOW) == expected
    # A run for each time at which every upstream met the condition; a missed run for each
    # time at which some met it and none failed it; nothing for the others.
    status = {(e.slot, e.upstream_job_id): e.status for e in ends}
    runs = {run.slot for run in expected if run.runs}
    missed = {run.slot for run in expected if not run.runs}
    for slot in {e.slot for e in ends}:
        statuses = {status[(slot, j)] for j in UPSTREAMS if (slot, j) in status}
        complete = all((slot, j) in status for j in UPSTREAMS)
        assert (slot in runs) == (complete and statuses == {SUCCEEDED})
        assert (slot in missed) == (not complete and statuses == {SUCCEEDED})
    for run in expected:
        assert run.run_id == dependent_run_id(B, run.upstream_run_ids)


def test_a_new_owner_folding_the_recorded_ends_at_their_times_gets_the_same_state() -> None:
    live = fan_in(A1, A2, A3)
    recorded: list[tuple[UpstreamEnd, datetime]] = []
    script = [(end(A1), NOW), (end(A2, T + HOUR), NOW), (end(A1), NOW),
              (end(A3, T + HOUR), NOW + 2 * HOUR), (end(A2), NOW + 2 * HOUR),
              (end(A1, T + 2 * HOUR), NOW + 3 * HOUR), (end(A3, T + 2 * HOUR), NOW + 3 * HOUR)]
    for upstream_end, at in script:
        if live.record(upstream_end, at).recorded:  # what the owner writes as an event
            recorded.append((upstream_end, at))
    rebuilt = fan_in(A1, A2, A3)
    for upstream_end, at in recorded:
        rebuilt.record(upstream_end, at)
    assert rebuilt.waiting() == live.waiting()
    assert rebuilt.next_deadline() == live.next_deadline()
    later = NOW + 5 * HOUR
    assert rebuilt.expire(later) == live.expire(later)


def test_a_decision_read_back_from_the_log_is_not_made_again() -> None:
    live = fan_in(A1, A2)
    live.record(end(A1), NOW)
    (missed,) = live.expire(NOW + HOUR)  # written by the old owner's timer, then it died
    rebuilt = fan_in(A1, A2)
    rebuilt.record(end(A1), NOW)
    rebuilt.note_settled(missed.slot, missed.upstream_run_ids, NOW + HOUR)
    assert rebuilt.expire(NOW + HOUR) == ()
    assert rebuilt.record(end(A2), NOW + HOUR).folded is Folded.LATE
    assert rebuilt.record(end(A1), NOW + HOUR).folded is Folded.DUPLICATE
    assert rebuilt.next_deadline() is None
