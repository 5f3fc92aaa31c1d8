"""One owner cycle's working set: the jobs and runs it has loaded and changed, committed or
dropped as a whole, and the cache of runs that outlives cycles."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from cronlog.commands.owner.ports import Outgoing, OwnerStore, StoredRequest
from cronlog.commands.owner.request_ids import Answered
from cronlog.domain.calendar import Calendar
from cronlog.domain.channel import Channel
from cronlog.domain.fan_in import FanIn
from cronlog.domain.ids import as_uuid
from cronlog.domain.job import Job
from cronlog.domain.run import Run
from cronlog.ports import InboundMessage, Record


class RunCache:
    """Unfinished runs as this owner last committed them. The owner is their only writer,
    so while it keeps its partitions these are the truth and spare a Postgres read (and a
    decode) per worker report. Dropped whole whenever the owner re-reads state."""

    def __init__(self, size: int = 100_000) -> None:
        # About 1 KB a run. Past this many runs in flight every report costs a Postgres
        # read and a decode, which slows the owner exactly when it is behind: keep it well
        # above what an owner has in flight at its peak.
        self._size = size
        self._runs: OrderedDict[UUID, Run] = OrderedDict()

    def get(self, run_id: UUID) -> Run | None:
        return self._runs.get(run_id)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def __len__(self) -> int:
        return len(self._runs)

    def clear(self) -> None:
        self._runs.clear()

    def remember(self, runs: Sequence[Run]) -> None:
        """After a commit: unfinished runs are kept (the newest last), finished ones gone."""
        for run in runs:
            if run.finished:
                self._runs.pop(run.id, None)
                continue
            self._runs[run.id] = run
            self._runs.move_to_end(run.id)
        while len(self._runs) > self._size:
            self._runs.popitem(last=False)


@dataclass
class Cycle:
    """What one owner cycle has loaded and changed; committed or dropped as a whole. Each
    job and run is loaded once a cycle, and every decision of the cycle sees the others'."""

    store: OwnerStore
    cache: RunCache
    # Attempts due after this are not dispatched yet but wait (AttemptWaiting).
    dispatch_until: datetime

    jobs: dict[UUID, Job] = field(default_factory=dict)
    runs: dict[UUID, Run] = field(default_factory=dict)
    replies: list[Outgoing] = field(default_factory=list)
    # Requests decided this cycle, by (job, request id): a retry in the same batch gets the
    # same answer, a reuse with another body is refused.
    answered: dict[tuple[UUID, str], Answered] = field(default_factory=dict)
    missing_jobs: set[UUID] = field(default_factory=set)
    # The stored requests of the cycle's commands, read at once (prefetch_commands); a key
    # here with None is known not to be taken.
    stored_requests: dict[tuple[UUID, str], StoredRequest | None] = field(
        default_factory=dict)
    missing_runs: set[UUID] = field(default_factory=set)
    # Jobs whose unfinished runs this cycle has gathered (Postgres plus this cycle's runs).
    unfinished_of: dict[UUID, list[Run]] = field(default_factory=dict)
    alerts: list[Outgoing] = field(default_factory=list)
    # Where a withdrawn attempt was dispatched, when the job's queue changed since.
    dispatched_to: dict[UUID, str] = field(default_factory=dict)
    # Runs whose dispatched attempt this cycle lost before any worker started it.
    never_started: set[UUID] = field(default_factory=set)
    alerted_queues: set[str] = field(default_factory=set)
    # Dependent jobs' fan-ins this cycle has loaded and changed (issue 16).
    fan_ins: dict[UUID, FanIn] = field(default_factory=dict)
    # Messages to other jobs' owners (links, upstream run ends), through the inbox.
    relays: list[Outgoing] = field(default_factory=list)
    # Calendars this cycle has loaded and changed, by id; None: known not to exist.
    calendars: dict[UUID, Calendar | None] = field(default_factory=dict)
    # Alert channels this cycle has loaded and changed, by id (issue 37); None: none such.
    channels: dict[UUID, Channel | None] = field(default_factory=dict)

    def fan_in(self, job: Job) -> FanIn:
        fan_in = self.fan_ins.get(job.id)
        if fan_in is None:
            fan_in = self.fan_ins[job.id] = self.store.fan_in(job)
        return fan_in

    def job(self, job_id: UUID) -> Job | None:
        if job_id in self.jobs:
            return self.jobs[job_id]
        if job_id in self.missing_jobs:
            return None
        job = self.store.job(job_id)
        if job is not None:
            self.jobs[job_id] = job
        return job

    def run(self, run_id: UUID) -> Run | None:
        if run_id in self.runs:
            return self.runs[run_id]
        if run_id in self.missing_runs:
            return None
        run = self.cache.get(run_id) or self.store.run(run_id)
        if run is not None:
            self.runs[run_id] = run
        return run

    def prefetch(self, reports: Sequence[InboundMessage]) -> None:
        """Loads the runs that worker reports name, and their jobs (for timeouts and
        retries), in one query each instead of one per report."""
        wanted: set[UUID] = set()
        job_ids: set[UUID] = set()
        for report in reports:
            try:
                run_id = as_uuid(report.record["run_id"])
                job_ids.add(as_uuid(report.record["job_id"]))
            except (KeyError, TypeError, ValueError):
                continue  # the report fails on its own when it is decided
            cached = self.cache.get(run_id)
            if cached is not None:
                self.runs[run_id] = cached
            else:
                wanted.add(run_id)
        if len(wanted) >= 2:
            for run in self.store.load_runs(sorted(wanted)):
                self.runs[run.id] = run
            self.missing_runs |= wanted - set(self.runs)
        if len(reports) < 2:
            return
        jobs = job_ids - set(self.jobs)
        for job in self.store.load_jobs(sorted(jobs)):
            self.jobs.setdefault(job.id, job)
        self.missing_jobs |= jobs - set(self.jobs)

    def stored_request(self, job_id: UUID, request_id: str) -> StoredRequest | None:
        key = (job_id, request_id)
        if key in self.stored_requests:
            return self.stored_requests[key]
        return self.store.request(job_id, request_id)

    def prefetch_commands(self, commands: Sequence[InboundMessage]) -> None:
        """Loads the jobs that commands name and their requests as stored, in one query
        each instead of two per command: a batch of creates would otherwise wait on
        Postgres round trips one by one."""
        keys: set[tuple[UUID, str]] = set()
        for command in commands:
            try:
                keys.add((as_uuid(command.record["job_id"]), str(command.record["request_id"])))
            except (KeyError, TypeError, ValueError):
                continue  # the command fails on its own when it is decided
        if len(keys) < 2:
            return
        jobs = {job_id for job_id, _ in keys} - set(self.jobs) - self.missing_jobs
        try:
            loaded = self.store.load_jobs(sorted(jobs))
            found = self.store.requests(sorted(keys))
        except Exception:
            # A row that does not load must fail only its own command (invariant 9): the
            # commands read their rows one by one, as without this, and fail alone.
            return
        for job in loaded:
            self.jobs.setdefault(job.id, job)
        self.missing_jobs |= jobs - set(self.jobs)
        self.stored_requests.update({key: found.get(key) for key in keys})

    def unfinished(self, job_id: UUID) -> list[Run]:
        """The job's runs that have not ended, as this cycle has left them. The list is
        shared within the cycle, so every decision on the job sees the ones before it."""
        runs = self.unfinished_of.get(job_id)
        if runs is None:
            runs = [self.runs.setdefault(r.id, self.cache.get(r.id) or r)
                    for r in self.store.unfinished_runs(job_id)]
            self.unfinished_of[job_id] = runs
        known = {r.id for r in runs}
        runs.extend(r for r in self.runs.values() if r.job_id == job_id and r.id not in known)
        runs[:] = [r for r in runs if not r.finished]
        return runs


# What decides one kind of inbox message within a cycle.
Handler = Callable[[Record, datetime, Cycle], None]
