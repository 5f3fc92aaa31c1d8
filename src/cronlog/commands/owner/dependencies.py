"""Dependencies as an owner decides them (issue 16, docs/dependencies.md).

On an upstream job's owner: links from dependents (DependentLinked/Unlinked) become the
job's own events, and the end of every run of its chain is sent to each dependent, in the
transaction that writes the end (`ended`, called by the outbox). On a dependent job's
owner: upstream ends are folded into the job's fan-in, which decides its dependent runs,
and the wait-window timers record the logical times whose upstreams never all came.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime
from uuid import UUID

from cronlog.commands.owner import relays
from cronlog.commands.owner.owner_cycle import Cycle, Handler
from cronlog.commands.owner.ports import Outgoing, OwnerStore, Produced, Topics
from cronlog.commands.owner.set_aside import JobsSetAside, blaming
from cronlog.domain.catalogue import JobEvent, Relay, RunEvent
from cronlog.domain.dependency import ChainSlot, Dependency, UpstreamEnd
from cronlog.domain.errors import InvalidSpec, JobNotActive
from cronlog.domain.fan_in import DependentRun
from cronlog.domain.ids import as_uuid
from cronlog.domain.job import Job
from cronlog.domain.job_status import DELETED
from cronlog.domain.run import Run
from cronlog.log_fields import log_fields
from cronlog.ports import Record

log = logging.getLogger(__name__)

# The events that end a run; its dependents hear of the end in the same transaction.
RUN_ENDING = frozenset({RunEvent.ATTEMPT_SUCCEEDED, RunEvent.SUCCEEDED, RunEvent.FAILED,
                        RunEvent.CANCELLED, RunEvent.MISSED, RunEvent.SKIPPED})


class Dependencies:
    def __init__(self, store: OwnerStore, topics: Topics, set_aside: JobsSetAside) -> None:
        self._store = store
        self._topics = topics
        self._set_aside = set_aside
        # Jobs of the owned partitions that have dependents, by job: only the ends of their
        # runs are looked at (one job read per run end would tax every run).
        self._upstreams: dict[UUID, int] = {}
        # Dependent jobs with logical times waiting: (partition, when the earliest window
        # passes).
        self._deadlines: dict[UUID, tuple[int, datetime]] = {}

    def handlers(self) -> dict[str, Handler]:
        return {Relay.UPSTREAM_RUN_ENDED: self._upstream_run_ended,
                Relay.DEPENDENT_LINKED: self._dependent_linked,
                Relay.DEPENDENT_UNLINKED: self._dependent_unlinked,
                Relay.UPSTREAM_UNAVAILABLE: self._upstream_unavailable}

    # -- taking and leaving partitions ---------------------------------------------------
    def adopt(self, partitions: Sequence[int]) -> None:
        if not partitions:
            return
        for partition, job_id in self._store.jobs_with_dependents(partitions):
            self._upstreams[job_id] = partition
        waiting = self._store.waiting_fan_ins(partitions)
        if not waiting:
            return
        jobs = {j.id: j for j in self._store.load_jobs(sorted({j for _, j, _ in waiting}))}
        for partition, job_id, opened_at in waiting:
            job = jobs.get(job_id)
            after = job.spec.after if job is not None else None
            if after is not None:
                self._deadlines[job_id] = (partition, opened_at + after.wait_window)

    def forget(self, partitions: set[int]) -> None:
        self._upstreams = {j: p for j, p in self._upstreams.items() if p not in partitions}
        self._deadlines = {j: d for j, d in self._deadlines.items() if d[0] not in partitions}

    @property
    def deadlines(self) -> dict[UUID, tuple[int, datetime]]:
        return self._deadlines

    # -- the dependent's side: its own links ---------------------------------------------
    def respec(self, job: Job, before: Dependency | None, now: datetime,
               cycle: Cycle) -> None:
        """After a create, update or delete of a job: links to the upstreams it now names,
        unlinks from those it no longer does, and a changed `after` re-aims the fan-in.
        The fan-in, when there was one, must have been loaded before the change."""
        old = set(before.job_ids) if before is not None else set()
        after = job.spec.after if job.status != DELETED else None
        new = set(after.job_ids) if after is not None else set()
        tenant = job.spec.tenant
        for upstream in sorted(new - old):
            cycle.relays.append(relays.dependent_linked(self._topics, upstream, job.id,
                                                        tenant, now))
        for upstream in sorted(old - new):
            cycle.relays.append(relays.dependent_unlinked(self._topics, upstream, job.id,
                                                          tenant, now))
        if before is not None and after is not None and after != before:
            fan_in = cycle.fan_ins.get(job.id)
            if fan_in is not None:
                self._decide(job, fan_in.retarget(after, now), now, cycle)

    # -- the dependent's side: upstream ends ---------------------------------------------
    def _upstream_run_ended(self, record: Record, now: datetime, cycle: Cycle) -> None:
        job = cycle.job(as_uuid(record["dependent_job_id"]))
        if (job is None or job.status == DELETED or job.spec.after is None
                or job.spec.tenant != str(record["tenant"])):
            # A dependent deleted, or no longer dependent, since the upstream heard of it.
            log.info("upstream run %s ended for job %s, which follows no upstream now",
                     record["upstream_run_id"], record["dependent_job_id"],
                     extra=log_fields(job_id=record["dependent_job_id"],
                                      run_id=record["upstream_run_id"]))
            return
        end = UpstreamEnd(
            upstream_job_id=as_uuid(record["upstream_job_id"]),
            upstream_run_id=as_uuid(record["upstream_run_id"]), status=str(record["status"]),
            slot=ChainSlot(record["logical_time"], str(record["cascade"])),
            depth=int(record["depth"]))
        fan_in = cycle.fan_in(job)
        opened_at = fan_in.opened_at(end.slot)
        fold = fan_in.record(end, now)
        if fold.recorded:
            job.record_upstream(end, fold, opened_at, now)
        else:
            log.info("upstream run %s of job %s for job %s: %s, nothing recorded",
                     end.upstream_run_id, end.upstream_job_id, job.id, fold.folded,
                     extra=log_fields(job.spec.tenant, job.id, end.upstream_run_id))
        self._decide(job, fold.decisions, now, cycle)

    def _decide(self, job: Job, decisions: Sequence[DependentRun], now: datetime,
                cycle: Cycle) -> None:
        for decision in decisions:
            if cycle.run(decision.run_id) is not None:
                # Invariant 11: an end seen again after its logical time was forgotten
                # derives the same run id; the run exists, so nothing more is created.
                log.warning("dependent run %s of job %s exists already", decision.run_id,
                            job.id, extra=log_fields(job.spec.tenant, job.id, decision.run_id))
                continue
            for run in job.run_after(decision, now, cycle.unfinished(job.id),
                                     cycle.dispatch_until):
                cycle.runs[run.id] = run

    def expire(self, owned: Collection[int], now: datetime, cycle: Cycle) -> None:
        """Records missed the logical times whose wait window has passed, of the jobs of
        the owned (logical) partitions."""
        for job_id, (partition, due) in list(self._deadlines.items()):
            if due > now or partition not in owned or job_id in self._set_aside:
                continue
            job = cycle.job(job_id)
            if job is None or job.spec.after is None:
                del self._deadlines[job_id]
                continue
            with blaming(job.id, job.spec.tenant):
                fan_in = cycle.fan_in(job)
                self._decide(job, fan_in.expire(now), now, cycle)
                following = fan_in.next_deadline()
            # Armed again from what the fold says now; a dropped cycle leaves the log as it
            # was, and the next expiry finds the same logical times.
            if following is None:
                del self._deadlines[job_id]
            else:
                self._deadlines[job_id] = (partition, following)

    # -- the upstream's side -------------------------------------------------------------
    def _dependent_linked(self, record: Record, now: datetime, cycle: Cycle) -> None:
        upstream_id = as_uuid(record["upstream_job_id"])
        dependent_id = as_uuid(record["dependent_job_id"])
        job = cycle.job(upstream_id)
        if job is None or job.status == DELETED or job.spec.tenant != str(record["tenant"]):
            # Another tenant's job and a missing one look the same (invariant 10).
            cycle.relays.append(relays.upstream_unavailable(
                self._topics, dependent_id, upstream_id, f"job {upstream_id} not found", now))
            return
        try:
            job.link_dependent(dependent_id, now)
        except (InvalidSpec, JobNotActive) as exc:
            cycle.relays.append(relays.upstream_unavailable(
                self._topics, dependent_id, upstream_id, str(exc), now))

    def _dependent_unlinked(self, record: Record, now: datetime, cycle: Cycle) -> None:
        job = cycle.job(as_uuid(record["upstream_job_id"]))
        if job is not None and job.spec.tenant == str(record["tenant"]):
            job.unlink_dependent(as_uuid(record["dependent_job_id"]), now)

    def _upstream_unavailable(self, record: Record, now: datetime, cycle: Cycle) -> None:
        job = cycle.job(as_uuid(record["dependent_job_id"]))
        upstream = as_uuid(record["upstream_job_id"])
        if job is None or job.spec.after is None or upstream not in job.spec.after.job_ids:
            return
        log.warning("job %s: upstream job %s refused the link: %s", job.id, upstream,
                    record["reason"], extra=log_fields(job.spec.tenant, job.id))
        job.upstream_unavailable(upstream, str(record["reason"]), now)

    def ended(self, run: Run, names: Sequence[str], at: datetime,
              cycle: Cycle) -> list[Outgoing]:
        """The "upstream run ended" messages for a run that ended in this cycle: one per
        dependent of its job, when the run belongs to a chain. A re-driven run's dependents
        heard of its end when it was dead-lettered: its logical time is settled, and a
        second end is not sent (docs/lifecycle.md, "Re-driving a dead letter")."""
        cascade = run.chain.cascade
        if cascade is None or not run.finished or RUN_ENDING.isdisjoint(names) \
                or run.attempt_base:
            return []
        job = cycle.jobs.get(run.job_id)
        if job is None and run.job_id in self._upstreams:
            job = cycle.job(run.job_id)
        if job is None or not job.dependents:
            return []
        return [relays.upstream_run_ended(self._topics, dependent, run, cascade, at)
                for dependent in job.dependents]

    # -- after a commit ------------------------------------------------------------------
    def committed(self, produced: Sequence[Produced], cycle: Cycle) -> None:
        """Keeps the index of upstream jobs and the wait-window timers current. Runs after
        every commit, so it looks at each message's name only, unless the cycle touched a
        fan-in."""
        for p in produced:
            if p.name in _UPSTREAM_CHANGES:
                job_id = as_uuid(p.record["job_id"])
                if p.name != JobEvent.DELETED and p.record["dependents"]:
                    self._upstreams[job_id] = p.partition
                else:
                    self._upstreams.pop(job_id, None)
        if not cycle.fan_ins:
            return
        partition_of: dict[UUID, int] = {}
        for p in produced:
            # A calendar's events (issue 20) name no job.
            if ((p.topic == self._topics.job_events or p.topic == self._topics.run_events)
                    and "job_id" in p.record):
                job_id = as_uuid(p.record["job_id"])
                if job_id in cycle.fan_ins:
                    partition_of[job_id] = p.partition
        for job_id, fan_in in cycle.fan_ins.items():
            following = fan_in.next_deadline()
            partition = partition_of.get(job_id, self._deadlines.get(job_id, (None,))[0])
            if following is None:
                self._deadlines.pop(job_id, None)
            elif partition is not None:
                self._deadlines[job_id] = (partition, following)


_UPSTREAM_CHANGES = frozenset({JobEvent.DEPENDENT_LINKED, JobEvent.DEPENDENT_UNLINKED,
                               JobEvent.DELETED})
