"""What one owner tells another through the inbox about dependent jobs (issue 16): links,
refused links and upstream run ends. Each is keyed by the job it is about on the receiving
side, so it reaches that job's owner (the inbox is partitioned by job id, like commands)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from cronlog.commands.owner.ports import Outgoing, Topics
from cronlog.domain.catalogue import Relay
from cronlog.domain.run import Run


def dependent_linked(topics: Topics, upstream: UUID, dependent: UUID, tenant: str,
                     at: datetime) -> Outgoing:
    return Outgoing(topics.inbox, str(upstream), Relay.DEPENDENT_LINKED, {
        "upstream_job_id": str(upstream), "dependent_job_id": str(dependent),
        "tenant": tenant, "at": at})


def dependent_unlinked(topics: Topics, upstream: UUID, dependent: UUID, tenant: str,
                       at: datetime) -> Outgoing:
    return Outgoing(topics.inbox, str(upstream), Relay.DEPENDENT_UNLINKED, {
        "upstream_job_id": str(upstream), "dependent_job_id": str(dependent),
        "tenant": tenant, "at": at})


def upstream_unavailable(topics: Topics, dependent: UUID, upstream: UUID, reason: str,
                         at: datetime) -> Outgoing:
    return Outgoing(topics.inbox, str(dependent), Relay.UPSTREAM_UNAVAILABLE, {
        "dependent_job_id": str(dependent), "upstream_job_id": str(upstream),
        "reason": reason[:2000], "at": at})


def upstream_run_ended(topics: Topics, dependent: UUID, run: Run, cascade: str,
                       at: datetime) -> Outgoing:
    return Outgoing(topics.inbox, str(dependent), Relay.UPSTREAM_RUN_ENDED, {
        "dependent_job_id": str(dependent), "upstream_job_id": str(run.job_id),
        "upstream_run_id": str(run.id), "tenant": run.tenant, "status": run.status,
        "logical_time": run.logical_time, "cascade": cascade, "depth": run.chain.depth,
        "at": at})


# -- calendars (issue 20, docs/calendars.md) ---------------------------------------------
def calendar_subscribed(topics: Topics, calendar: UUID, tenant: str, name: str, job: UUID,
                        at: datetime, subscribed: bool = True) -> Outgoing:
    """To the calendar's owner: the job follows it now (or no longer)."""
    kind = Relay.CALENDAR_SUBSCRIBED if subscribed else Relay.CALENDAR_UNSUBSCRIBED
    return Outgoing(topics.inbox, str(calendar), kind, {
        "calendar_id": str(calendar), "tenant": tenant, "name": name, "job_id": str(job),
        "at": at})


def calendar_published(topics: Topics, job: UUID, calendar: UUID, tenant: str, name: str,
                       version: int, found: bool, exclusions: list[dict[str, Any]],
                       at: datetime, by_reference: bool = False) -> Outgoing:
    """To a following job's owner: the calendar's version and excluded days, or (an update,
    issue 33) its version only, whose days the job's owner reads from the projection."""
    return Outgoing(topics.inbox, str(job), Relay.CALENDAR_PUBLISHED, {
        "job_id": str(job), "calendar_id": str(calendar), "tenant": tenant, "name": name,
        "version": version, "found": found, "exclusions": exclusions, "at": at,
        "by_reference": by_reference})
