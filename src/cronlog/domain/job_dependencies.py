"""A job's part in dependencies (issue 16, docs/dependencies.md): the jobs that run after
it, the upstream ends that change its fan-in, and its dependent runs.

A base class of the Job aggregate, so that its events stay the Job's (on the job's log,
replayed with it) while this behaviour lives apart from the schedule's.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from eventsourcing.domain import event

from cronlog.domain.aggregate import CronlogAggregate
from cronlog.domain.dependency import MAX_DEPENDENTS, UpstreamEnd
from cronlog.domain.errors import InvalidSpec, JobNotActive
from cronlog.domain.fan_in import DependentRun, Fold
from cronlog.domain.job_status import ACTIVE, DELETED
from cronlog.domain.overlap import run_under_policy
from cronlog.domain.run import Chain, Run

if TYPE_CHECKING:
    from cronlog.domain.spec import JobSpec


class JobDependencies(CronlogAggregate):
    if TYPE_CHECKING:  # the Job's, declared there (an annotation here would be an event field)
        spec: JobSpec
        status: str
        dependents: tuple[UUID, ...]

    def link_dependent(self, dependent_id: UUID, at: datetime) -> None:
        """Another job now runs after this one: its runs' ends are sent to it."""
        if self.status == DELETED:
            raise JobNotActive(f"job {self.id} is deleted")
        if dependent_id in self.dependents:
            return
        if len(self.dependents) >= MAX_DEPENDENTS:
            raise InvalidSpec("spec.after.job_ids",
                              f"job {self.id} already has {MAX_DEPENDENTS} dependent jobs")
        self._dependent_linked(dependent_job_id=dependent_id,
                               dependents=(*self.dependents, dependent_id), timestamp=at)

    @event("JobDependentLinked")
    def _dependent_linked(self, dependent_job_id: UUID, dependents: tuple[UUID, ...],
                          timestamp: datetime) -> None:
        self.dependents = tuple(dependents)

    def unlink_dependent(self, dependent_id: UUID, at: datetime) -> None:
        if dependent_id in self.dependents:
            self._dependent_unlinked(
                dependent_job_id=dependent_id,
                dependents=tuple(d for d in self.dependents if d != dependent_id), timestamp=at)

    @event("JobDependentUnlinked")
    def _dependent_unlinked(self, dependent_job_id: UUID, dependents: tuple[UUID, ...],
                            timestamp: datetime) -> None:
        self.dependents = tuple(dependents)

    def record_upstream(self, end: UpstreamEnd, fold: Fold, opened_at: datetime | None,
                        at: datetime) -> None:
        """Records an upstream end that changed this job's fan-in (waiting, decided or
        closed): the fan-in is a fold of these records (domain/fan_in.py)."""
        self._upstream_recorded(
            upstream_job_id=end.upstream_job_id, upstream_run_id=end.upstream_run_id,
            status=end.status, logical_time=end.slot.logical_time, cascade=end.slot.cascade,
            depth=end.depth, folded=str(fold.folded), opened_at=opened_at or at,
            reason=fold.reason[:2000] if fold.reason else None, timestamp=at)

    @event("JobUpstreamRecorded")
    def _upstream_recorded(self, upstream_job_id: UUID, upstream_run_id: UUID, status: str,
                           logical_time: datetime, cascade: str, depth: int, folded: str,
                           opened_at: datetime, reason: str | None,
                           timestamp: datetime) -> None:
        pass

    def upstream_unavailable(self, upstream_id: UUID, reason: str, at: datetime) -> None:
        """An upstream this job names refused the link (deleted, missing, full): recorded,
        so that `cronlog audit` and an operator see why the job never runs."""
        self._upstream_unavailable(upstream_job_id=upstream_id, reason=reason[:2000],
                                   timestamp=at)

    @event("JobUpstreamUnavailable")
    def _upstream_unavailable(self, upstream_job_id: UUID, reason: str,
                              timestamp: datetime) -> None:
        pass

    def run_after(self, decision: DependentRun, now: datetime, unfinished: list[Run],
                  dispatch_until: datetime | None = None) -> list[Run]:
        """The dependent run of one logical time: run under the overlap policy, or recorded
        missed (its upstreams did not all come, or this job is paused or deleted). Returns
        the runs created or changed."""
        chain = Chain(cascade=decision.slot.cascade, logical_time=decision.logical_time,
                      upstream_run_ids=decision.upstream_run_ids, depth=decision.depth)
        reason = decision.missed_reason
        if reason is None and self.status != ACTIVE:
            reason = f"job {self.status}"
        run_id = decision.run_id
        if reason is not None:
            return [Run.missed(self, now, reason, now, run_id=run_id, chain=chain,
                               trigger="dependency")]

        def start(hold: bool) -> Run:
            return Run.schedule(self, now, "dependency", at=now, run_id=run_id, hold=hold,
                                not_before=now, dispatch_until=dispatch_until, chain=chain)

        def skip(why: str) -> Run:
            return Run.skipped(self, now, why, now, run_id=run_id, chain=chain,
                               trigger="dependency")

        return run_under_policy(self.spec.overlap_policy, unfinished, now, start, skip,
                                f"dependent run {run_id}", waits_too=False)
