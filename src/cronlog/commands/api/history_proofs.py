"""VerifyHistory and WhatIf at the api (issue 38, docs/verify.md): what `cronlog verify` and
`cronlog what-if` do, for a tenant, within a bound a tenant cannot move.

A proof reads the Kafka log (every job event of the partitions in scope, and the run events
from a little before the window), which no tenant's request may make unbounded: a window of
at most MAX_PROOF_WINDOW, at most MAX_PROOF_JOBS named jobs, at most `most_records` records
read (past it the call is refused, naming the operator's command, which has no such bound),
and one proof at a time per api (the tenant budget charges each as PROOF_READS reads and
lets each tenant run one heavy call at a time)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from cronlog.domain.errors import DomainError, InvalidSpec, JobNotFound
from cronlog.domain.exclusions import NO_EXCLUSIONS, excluded_by
from cronlog.domain.spec import JobSpec, validate_spec
from cronlog.ports import Clock
from cronlog.verification.findings import JobVerdict
from cronlog.verification.fire_chain import walk_fire_chain
from cronlog.verification.verifier import TooManyJobs, Verification, tenant_of, verify
from cronlog.verification.what_if import WhatIf, current_fire_times, history_facts, replay
from cronlog.verification.window import InvalidWindow, Window

Events = list[tuple[str, dict[str, Any]]]
ToEvent = Callable[[str, Any], Any]

MAX_PROOF_WINDOW = timedelta(days=31)
MAX_PROOF_JOBS = 100
# About two seconds of one core to read and decode (docs/benchmarks.md has the figure).
MOST_RECORDS = 200_000
DEFAULT_SETTLE = timedelta(minutes=10)
MIN_SETTLE = timedelta(seconds=1)


class LogTooLarge(DomainError):
    """The proof would read more of the log than one call may."""

    status = "RESOURCE_EXHAUSTED"

    def __init__(self, most_records: int) -> None:
        super().__init__(f"the log holds more than the {most_records:,} records one call reads "
                         "for this proof: name fewer jobs or a shorter window, or ask an "
                         "operator for `cronlog verify` (no such bound)")


class HistoryNotHeld(DomainError):
    """The log no longer holds part of what the window needs (its retention)."""

    field = "since"


class ProofBusy(DomainError):
    """Another proof is running on this api."""

    status = "RESOURCE_EXHAUSTED"


class EventLogReader(Protocol):
    def tenant_log(self, window: Window, tenant: str, job_ids: Sequence[str],
                   most_records: int) -> tuple[dict[str, Events], dict[str, Events]]:
        """The tenant's jobs' events (of `job_ids` alone when given) and their run events
        from before the window. LogTooLarge past most_records read; HistoryNotHeld when
        the log no longer holds them."""

    def job_log(self, job_id: UUID, window: Window,
                most_records: int) -> tuple[Events, Events]:
        """One job's events and its run events from before the window (as tenant_log)."""


def proof_window(since: datetime, until: datetime | None, now: datetime) -> Window:
    """The window asked for, naming the field at fault."""
    end = until or now
    if end > now:
        raise InvalidSpec("until", f"{end.isoformat()} is in the future")
    try:
        window = Window(since, end)
    except InvalidWindow as exc:
        raise InvalidSpec(exc.field.lstrip("-"), str(exc).split(": ", 1)[-1]) from None
    if window.until - window.since > MAX_PROOF_WINDOW:
        raise InvalidSpec("since", f"a window of at most {MAX_PROOF_WINDOW.days} days a call")
    return window


def _job_ids(job_ids: Sequence[str]) -> list[str]:
    if len(job_ids) > MAX_PROOF_JOBS:
        raise InvalidSpec("job_ids", f"at most {MAX_PROOF_JOBS} jobs a call, not "
                                     f"{len(job_ids)}")
    for job_id in job_ids:
        try:
            UUID(job_id)
        except ValueError:
            raise InvalidSpec("job_ids", f"{job_id[:40]!r} is not a UUID") from None
    return list(job_ids)


@dataclass
class HistoryProofs:
    log: EventLogReader
    clock: Clock
    # The scheduler's, for what-if's misfires (the service's CRONLOG_CATCH_UP_WINDOW_MS).
    catch_up_window: timedelta
    to_event: ToEvent
    most_records: int = MOST_RECORDS
    _running: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def _one_at_a_time(self) -> Iterator[None]:
        if not self._running.acquire(blocking=False):
            raise ProofBusy("another history proof is running on this api: retry in a "
                            "few seconds")
        try:
            yield
        finally:
            self._running.release()

    def verify(self, tenant: str, job_ids: Sequence[str], since: datetime,
               until: datetime | None, settle: timedelta | None) -> Verification:
        now = self.clock.now()
        window = proof_window(since, until, now)
        wanted = _job_ids(job_ids)
        settle = settle if settle is not None else DEFAULT_SETTLE
        if settle < MIN_SETTLE:
            raise InvalidSpec("settle", f"at least {MIN_SETTLE.total_seconds():.0f} s")
        with self._one_at_a_time():
            job_events, run_events = self.log.tenant_log(window, tenant, wanted,
                                                         self.most_records)
        try:
            return verify(job_events, run_events, window, now - settle, self.to_event, tenant,
                          wanted)
        except TooManyJobs as exc:
            raise InvalidSpec("job_ids", str(exc)) from None

    def what_if(self, job_id: UUID, spec: JobSpec, since: datetime,
                until: datetime | None) -> WhatIf:
        now = self.clock.now()
        window = proof_window(since, until, now)
        spec = validate_spec(spec)
        with self._one_at_a_time():
            job_events, run_events = self.log.job_log(job_id, window, self.most_records)
        if not job_events:
            raise JobNotFound(f"job {job_id} not found")
        if tenant_of(job_events) != spec.tenant:
            raise InvalidSpec("spec.tenant", "a job cannot move to another tenant")
        job_events.sort(key=lambda e: int(e[1]["version"]))
        chain = walk_fire_chain(job_events, self.to_event, window,
                                JobVerdict(str(job_id), spec.tenant))
        held = chain.job.calendar if chain.job is not None else None
        calendar = held if held is not None and held.name == spec.calendar else None
        return replay(history_facts(job_events, run_events, now),
                      current_fire_times(chain, window), spec, window, self.catch_up_window,
                      lambda s: s.schedule(excluded_by(calendar) if calendar
                                           else NO_EXCLUSIONS))
