"""Firing: the due jobs of the owned partitions become runs, a lookahead ahead, within each
tenant's in-flight limit (counted as runs occupy capacity: commands/owner/in_flight.py); held
runs (overlap BUFFER_ONE, serial backfills) are released when the job's other runs have ended."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from uuid import UUID

from cronlog.commands.owner import owner_messages as messages
from cronlog.commands.owner.in_flight import IN_FLIGHT_WINDOW, CycleOccupancy, InFlightRuns, in_flight
from cronlog.commands.owner.owner_cycle import Cycle
from cronlog.commands.owner.ports import DueWindow, OwnerStore, Topics
from cronlog.commands.owner.set_aside import OUTSIDE_FAILURES, JobFailed, JobsSetAside, blaming
from cronlog.domain.held_runs import next_to_release
from cronlog.domain.limits import TenantLimits
from cronlog.domain.run import Run
from cronlog.log_fields import log_fields

log = logging.getLogger(__name__)


class Firing:
    def __init__(self, store: OwnerStore, topics: Topics, set_aside: JobsSetAside,
                 limits: TenantLimits, partitions: int, sparse_lookahead: timedelta,
                 catch_up_window: timedelta, chunk: int,
                 occupancy_window: timedelta = IN_FLIGHT_WINDOW) -> None:
        self._store = store
        self._topics = topics
        self._set_aside = set_aside
        self._limits = limits
        self._partitions = partitions
        self._sparse_lookahead = sparse_lookahead
        self._catch_up_window = catch_up_window
        self._chunk = chunk
        # A run occupies capacity from this long before its attempt's time (in_flight.py).
        self._window = occupancy_window
        # Unfinished runs of owned partitions, for the tenants' in-flight limits.
        self.in_flight = InFlightRuns(occupancy_window)
        # Tenants at their in-flight limit, alerted once per episode.
        self.limited: set[str] = set()
        # Jobs with held runs of owned partitions, by partition: checked for a release
        # whenever one of their runs ends.
        self.holding: dict[UUID, int] = {}

    # -- taking and leaving partitions ---------------------------------------------------
    def forget(self, partitions: set[int]) -> None:
        for job_id in [j for j, p in self.holding.items() if p in partitions]:
            del self.holding[job_id]
        self.in_flight.drop_partitions(partitions)

    def track_in_flight(self, partition: int, run: Run) -> None:
        self.in_flight.put(run.id, in_flight(run, partition))
        if run.held:
            self.holding[run.job_id] = partition

    # -- deciding ------------------------------------------------------------------------
    def _share(self, tenant: str, owned: int) -> int:
        return self._limits.in_flight_share(tenant, owned, self._partitions)

    def fire_due(self, owned: Collection[int], now: datetime, cycle: Cycle,
                 spent: Callable[[], bool] = lambda: False) -> None:
        """Fires due jobs, except for tenants at their in-flight limit: those fire times
        wait (the delay shows as start lag, and the tenant is alerted), so a tenant with a
        flood of due runs cannot hold back the others' (see docs/lifecycle.md). A job's
        next fire time fits when fewer than the tenant's share of its runs occupy capacity
        at that time: running now, due by now, or due around then (commands/owner/in_flight.py);
        runs enqueued for later do not count. At most one chunk of due jobs, each at most
        one bounded search per fire time; once `spent()` (the cycle's budget, asked between
        jobs) the rest wait for the next cycle, which fires them a lookahead ahead all the
        same."""
        horizon = cycle.dispatch_until
        window = DueWindow(until=horizon,
                           sparse_until=max(horizon, now + self._sparse_lookahead),
                           sparse_gap=self._sparse_lookahead)
        occupancy = CycleOccupancy(self.in_flight, self._window)
        tenants = set(self.in_flight.tenants())
        for run in cycle.runs.values():
            occupancy.update(run)
            tenants.add(run.tenant)
        share = len(owned)

        def occupying_now(tenant: str) -> int:
            return occupancy.occupying(tenant, now, now)

        full = sorted(t for t in tenants if occupying_now(t) >= self._share(t, share))
        for taken, due in enumerate(self._store.due_jobs(owned, window, self._chunk, full)):
            if taken and spent():
                break
            if due.id in self._set_aside:
                continue
            job = cycle.jobs.setdefault(due.id, due)
            tenant = job.spec.tenant
            at = job.next_fire_at if job.next_fire_at is not None else now
            room = self._share(tenant, share) - occupancy.occupying(tenant, now, at)
            if room <= 0:
                self._alert_limited(tenant, job.id, share, now, cycle)
                continue
            try:  # inline, not blaming(): this runs for every due job
                if job.fires_ahead:
                    until = (window.sparse_until if job.runs_apart(window.sparse_gap)
                             else horizon)
                    runs = job.fire_due(now, until, self._catch_up_window, limit=room)
                elif job.next_fire_at is not None and job.next_fire_at <= now:
                    runs = job.fire_due(now, now, self._catch_up_window, limit=room,
                                        unfinished=cycle.unfinished(job.id))
                else:
                    continue
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                raise JobFailed(job.id, tenant, exc) from exc
            for run in runs:
                occupancy.update(run)
                cycle.runs[run.id] = run
        for tenant in full:
            # Alerts name a job: one of the tenant's in-flight runs' jobs.
            job_id = self.in_flight.a_job_of(tenant) or next(
                (r.job_id for r in cycle.runs.values() if r.tenant == tenant), None)
            if job_id is not None:
                self._alert_limited(tenant, job_id, share, now, cycle)
        self.limited = {t for t in self.limited if occupying_now(t) >= self._share(t, share)}

    def _alert_limited(self, tenant: str, job_id: UUID, owned: int, now: datetime,
                       cycle: Cycle) -> None:
        if tenant in self.limited:
            return
        share = self._share(tenant, owned)
        log.warning("tenant %s is at its in-flight limit here (%d runs): its due fire times "
                    "wait", tenant, share, extra=log_fields(tenant))
        self.limited.add(tenant)
        cycle.alerts.append(messages.tenant_limit_alert(self._topics, tenant, job_id, share, now))

    def release_held(self, now: datetime, cycle: Cycle) -> None:
        """Dispatches a held run of each job whose other runs have all ended."""
        candidates = {r.job_id for r in cycle.runs.values() if r.held}
        candidates |= {r.job_id for r in cycle.runs.values()
                       if r.finished and r.job_id in self.holding}
        for job_id in candidates:
            job = cycle.job(job_id)
            if job is None or job_id in self._set_aside:
                continue
            with blaming(job.id, job.spec.tenant):
                run = next_to_release(cycle.unfinished(job_id))
                if run is not None:
                    run.release(job.spec.timeout, now, cycle.dispatch_until)

    # -- after a commit ------------------------------------------------------------------
    def cycle_committed(self, cycle: Cycle, partition_of: dict[UUID, int]) -> None:
        """The runs the cycle committed: in flight or ended, held or released."""
        for run in cycle.runs.values():
            if run.finished:
                self.in_flight.discard(run.id)
                continue
            partition = partition_of.get(run.job_id)
            if partition is not None:
                self.in_flight.put(run.id, in_flight(run, partition))
                if run.held:
                    self.holding[run.job_id] = partition
        for job_id, runs in cycle.unfinished_of.items():
            if not any(r.held for r in runs if not r.finished):
                self.holding.pop(job_id, None)
