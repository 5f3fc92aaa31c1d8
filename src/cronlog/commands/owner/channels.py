"""Alert channels as an owner decides them (issue 37, docs/alerts.md "Channels").

On a channel's owner (the owner of its id's partition): CreateChannel, UpdateChannel,
DeleteChannel and RotateChannelSecret become the channel's events, written to the
job-events topic keyed by the channel's id in the transaction of the reply, with the
request id taken on that id (JobRequestApplied), exactly as a calendar's commands are.

Another tenant's channel and a missing one are answered alike, NOT_FOUND (invariant 10):
the id derives from the tenant, so only a message the api did not write can name one.
A deleted channel is not found by update, rotation or delete. A CreateChannel naming it
restores it (ChannelRestored) with the new settings at its next secret rotation: never
at rotation 0 again, which would sign with the secret the deleted channel was given
(domain/channel.py).
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from cronlog.commands.messages import (
    ChannelCommand,
    CreateChannel,
    DeleteChannel,
    RotateChannelSecret,
    UpdateChannel,
    typed,
)
from cronlog.commands.owner import owner_messages as messages
from cronlog.commands.owner.owner_cycle import Cycle, Handler
from cronlog.commands.owner.ports import EventRecords, Outgoing, OwnerStore, Topics
from cronlog.commands.owner.request_ids import Answered, Outcome, Request, earlier_outcome
from cronlog.domain.catalogue import Command
from cronlog.domain.channel import Channel
from cronlog.domain.errors import DomainError, StaleVersion


class Channels:
    def __init__(self, store: OwnerStore, records: EventRecords, topics: Topics) -> None:
        self._store = store
        self._records = records
        self._topics = topics

    def handlers(self) -> dict[str, Handler]:
        return {Command.CREATE_CHANNEL: typed(CreateChannel, self._create),
                Command.UPDATE_CHANNEL: typed(UpdateChannel, self._update),
                Command.DELETE_CHANNEL: typed(DeleteChannel, self._delete),
                Command.ROTATE_CHANNEL_SECRET: typed(RotateChannelSecret, self._rotate)}

    def _channel(self, cid: UUID, cycle: Cycle) -> Channel | None:
        if cid not in cycle.channels:
            cycle.channels[cid] = self._store.channel(cid)
        return cycle.channels[cid]

    def _answered_before(self, request: Request, cycle: Cycle) -> bool:
        answered = cycle.answered.get(request.key)
        stored = (None if answered is not None
                  else self._store.request(request.job_id, request.request_id))
        earlier = earlier_outcome(request, answered, stored)
        if earlier is not None:
            self._answer(request, earlier, cycle)
        return earlier is not None

    def _answer(self, request: Request, outcome: Outcome, cycle: Cycle,
                applied_at: datetime | None = None) -> None:
        """Replies; with `applied_at` the request id is taken on the channel's id, in the
        transaction of its events."""
        if request.key not in cycle.answered:
            cycle.answered[request.key] = Answered(request, outcome)
            if applied_at is not None and outcome.job_version is not None:
                cycle.replies.append(messages.request_applied(
                    self._topics, request.job_id, outcome.job_version, request.request_id,
                    request.command, request.digest, applied_at))
        cycle.replies.append(messages.reply(
            self._topics, request.request_id, outcome.ok, outcome.code, outcome.message,
            outcome.job_id, outcome.job_version, request.correlation_id, outcome.field))

    def _emit(self, channel: Channel, cycle: Cycle) -> None:
        for event in channel.collect_events():
            name, out = self._records.to_record(event)
            cycle.replies.append(Outgoing(self._topics.job_events, str(channel.id), name, out))

    def _applied(self, request: Request, channel: Channel, now: datetime,
                 cycle: Cycle) -> None:
        self._emit(channel, cycle)
        self._answer(request, Outcome(ok=True, job_id=channel.id, job_version=channel.version),
                     cycle, applied_at=now)

    def _live(self, request: Request, command: ChannelCommand,
              cycle: Cycle) -> Channel | None:
        """The tenant's live channel of that name; None, answered NOT_FOUND, otherwise."""
        channel = self._channel(request.job_id, cycle)
        if channel is None or channel.tenant != command.tenant or channel.deleted:
            self._answer(request, Outcome(ok=False, code="NOT_FOUND", field="name",
                                          message=f"channel {command.name!r} not found"),
                         cycle)
            return None
        return channel

    def _create(self, command: CreateChannel, now: datetime, cycle: Cycle) -> None:
        request = Request.of(command)
        if self._answered_before(request, cycle):
            return
        existing = self._channel(request.job_id, cycle)
        if existing is not None and (existing.tenant != command.tenant
                                     or not existing.deleted):
            self._answer(request, Outcome(
                ok=False, code="ALREADY_EXISTS", field="name",
                message=f"channel {command.name!r} already exists"), cycle)
            return
        try:
            if existing is not None:
                # Deleted: restored under its id, at its next secret rotation.
                existing.recreate(command.kind, command.target, command.recipients,
                                  command.description, bool(command.is_default),
                                  request.request_id, now)
                channel = existing
            else:
                channel = Channel.create(command.tenant, command.name, command.kind,
                                         command.target, command.recipients,
                                         command.description, bool(command.is_default),
                                         request.request_id, now)
        except DomainError as exc:
            self._answer(request, Outcome.refused(exc), cycle)
            return
        cycle.channels[channel.id] = channel
        self._applied(request, channel, now, cycle)

    def _update(self, command: UpdateChannel, now: datetime, cycle: Cycle) -> None:
        request = Request.of(command)
        if self._answered_before(request, cycle):
            return
        channel = self._live(request, command, cycle)
        if channel is None:
            return
        try:
            channel.update(command.target, command.recipients, command.description,
                           bool(command.is_default), request.request_id, now,
                           expected_version=int(command.expected_version))
        except StaleVersion as exc:
            self._answer(request, Outcome.refused(exc, field="expected_version"), cycle)
            return
        except DomainError as exc:
            self._answer(request, Outcome.refused(exc), cycle)
            return
        self._applied(request, channel, now, cycle)

    def _delete(self, command: DeleteChannel, now: datetime, cycle: Cycle) -> None:
        request = Request.of(command)
        if self._answered_before(request, cycle):
            return
        channel = self._live(request, command, cycle)
        if channel is None:
            return
        channel.delete(request.request_id, now)
        self._applied(request, channel, now, cycle)

    def _rotate(self, command: RotateChannelSecret, now: datetime, cycle: Cycle) -> None:
        request = Request.of(command)
        if self._answered_before(request, cycle):
            return
        channel = self._live(request, command, cycle)
        if channel is None:
            return
        try:
            channel.rotate_secret(request.request_id, now)
        except DomainError as exc:
            self._answer(request, Outcome.refused(exc), cycle)
            return
        self._applied(request, channel, now, cycle)
