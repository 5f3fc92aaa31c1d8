"""An attempt's progress at the owner: a handler's heartbeat keeps its attempt alive like the
worker's, and its details become AttemptProgressed at most every PROGRESS_EVERY, only when
they changed, and before the attempt's end (commands/owner/attempt_tracking.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from cronlog.commands.owner.attempt_tracking import PROGRESS_EVERY
from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.domain.bounds import MAX_PROGRESS_BYTES
from cronlog.domain.run import Run
from tests.support.clock import FakeClock
from tests.support.owner_inbox import ONE_SHOT, inbound
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport
from tests.unit.commands.test_partition_owner import started_job


class Attempt:
    """A started attempt of ONE_SHOT (heartbeat timeout 5 s) on an owner."""

    def __init__(self) -> None:
        self.store, self.transport, self.clock = FakeStore(), FakeTransport(), FakeClock()
        self.owner: PartitionOwner
        self.owner, self.dispatch = started_job(self.store, self.transport, self.clock,
                                                ONE_SHOT)
        self.run_id = UUID(str(self.dispatch["run_id"]))
        run = self.store.runs[self.run_id]
        run.start(1, "w", self.clock.at, self.clock.at)
        run.collect_events()

    def report(self, name: str, **fields: Any) -> None:
        self.transport.inbox.append(inbound(name, {
            "run_id": str(self.run_id), "job_id": self.dispatch["job_id"], "attempt": 1,
            "worker": "w", **fields}))

    def beat(self, details: bytes | None, after: float = 1) -> list[tuple[str, Any]]:
        """A heartbeat `after` seconds on, and what the cycle that reads it writes."""
        self.clock.at += timedelta(seconds=after)
        self.report("HeartbeatReport", at=self.clock.at, details=details)
        return self.cycle()

    def cycle(self) -> list[tuple[str, Any]]:
        before = len(self.transport.transactions)
        self.owner.cycle()
        return [(o.name, o.record) for t in self.transport.transactions[before:] for o in t]


def progressed(written: list[tuple[str, Any]]) -> list[bytes]:
    return [record["details"] for name, record in written if name == "AttemptProgressed"]


def test_progress_is_recorded_at_most_every_ten_seconds_with_the_latest_details() -> None:
    attempt = Attempt()
    first = attempt.beat(b"1/20")
    assert progressed(first) == [b"1/20"]
    (event,) = [r for n, r in first if n == "AttemptProgressed"]
    assert (event["attempt"], event["worker"], event["progressed_at"]) == (1, "w",
                                                                          attempt.clock.at)
    steps = int(PROGRESS_EVERY / timedelta(seconds=2))
    written = [w for step in range(2, 2 + steps) for w in attempt.beat(f"{step}/20".encode(), 2)]
    assert progressed(written) == [f"{1 + steps}/20".encode()], "one, the latest, ten s on"
    assert not any(name == "AttemptLost" for name, _ in written), "kept alive all along"


def test_the_same_details_again_and_heartbeats_without_details_record_nothing() -> None:
    attempt = Attempt()
    assert progressed(attempt.beat(b"working")) == [b"working"]
    written = [w for _ in range(12) for w in attempt.beat(b"working", 2)]
    written += [w for _ in range(3) for w in attempt.beat(None, 2)]
    assert progressed(written) == []
    assert not any(name == "AttemptLost" for name, _ in written)


def test_progress_held_back_goes_before_the_attempts_end() -> None:
    attempt = Attempt()
    attempt.beat(b"99%")
    attempt.beat(b"100%")
    attempt.report("AttemptFinishedReport", finished_at=attempt.clock.at, outcome="succeeded",
                   output=b"ok", output_truncated=False, error=None)
    written = attempt.cycle()
    assert [name for name, _ in written][:2] == ["AttemptProgressed", "AttemptSucceeded"]
    assert progressed(written) == [b"100%"]


def test_progress_held_back_goes_before_the_attempt_is_lost() -> None:
    attempt = Attempt()
    attempt.beat(b"1%")
    attempt.beat(b"2%")
    attempt.clock.at += timedelta(seconds=6)
    written = attempt.cycle()
    assert [name for name, _ in written][:2] == ["AttemptProgressed", "AttemptLost"]


def test_run_progress_is_cut_to_the_bound_and_only_for_its_running_attempt() -> None:
    attempt = Attempt()
    run: Run = attempt.store.runs[attempt.run_id]
    at = attempt.clock.at
    assert not run.progress(2, "w", b"x", at, at), "not the run's attempt"
    assert run.progress(1, "w", b"x" * (MAX_PROGRESS_BYTES + 1), at, at)
    assert run.progress(1, "w", b"y", datetime(2200, 1, 1, tzinfo=UTC), at)
    # eventsourcing makes the events' classes from the aggregate's methods: their fields
    # are not declared anywhere a type checker looks.
    events: Sequence[Any] = run.collect_events()
    cut, far_clock = events
    assert len(cut.details) == MAX_PROGRESS_BYTES
    assert far_clock.progressed_at == at, "a time the history could not hold"
    run.succeed(1, "w", at, b"", False, at)
    assert not run.progress(1, "w", b"late", at, at), "an ended attempt has none"
