"""One owner of every job on in-memory fakes, with the inbox delivering its messages to
other jobs' owners back to it; and the same with calendars kept."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast
from uuid import UUID

from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.commands.owner.ports import Outgoing
from cronlog.domain.ids import job_id_for_request
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from tests.support.clock import T0, FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import create_message, inbound, report
from tests.support.owner_store import CalendarStore, FakeStore
from tests.support.owner_transport import FakeTransport


class World:
    """One owner of every job (one partition), whose inbox messages to other jobs' owners
    are delivered back to it, as the inbox would deliver them to the owner of their key."""

    def __init__(self) -> None:
        self.store, self.transport, self.clock = FakeStore(replays=True), FakeTransport(), FakeClock()
        self.owner: PartitionOwner = make_owner(self.store, self.transport, self.clock)
        self.delivered = 0
        self.offset = 1000

    def create(self, spec: JobSpec, request_id: str) -> UUID:
        self.send(create_message(spec, request_id))
        return job_id_for_request(spec.tenant, request_id)

    def send(self, message: Any) -> None:
        self.transport.inbox.append(message)
        self.settle()

    def settle(self) -> None:
        """Cycles until no owner-to-owner message is left undelivered."""
        for _ in range(20):
            self.owner.cycle()
            relayed = [o for t in self.transport.transactions[self.delivered:] for o in t
                       if o.topic == "inbox"]
            self.delivered = len(self.transport.transactions)
            if not relayed and not self.transport.inbox:
                return
            for out in relayed:
                self.offset += 1
                self.transport.inbox.append(inbound(out.name, dict(out.record), self.offset))
        raise AssertionError("messages kept coming")

    def at(self, seconds: float) -> None:
        self.clock.at = T0 + timedelta(seconds=seconds)
        self.settle()

    def runs_of(self, job_id: UUID) -> list[Run]:
        return sorted((r for r in self.store.runs.values() if r.job_id == job_id),
                      key=lambda r: (r.scheduled_at, str(r.id)))

    def finish(self, run: Run, outcome: str = "succeeded") -> None:
        fields: dict[str, Any] = {"finished_at": self.clock.at, "outcome": outcome,
                                  "output": b"", "output_truncated": False}
        if outcome == "failed":
            fields["error"] = "Boom: no"
        self.send(report("AttemptFinishedReport", run, **fields))

    def written(self, name: str | None = None) -> list[Outgoing]:
        """Every record the owner wrote, or those named `name`, in order."""
        return [o for t in self.transport.transactions for o in t
                if name is None or o.name == name]


class CalendarWorld(World):
    store: CalendarStore

    def __init__(self) -> None:
        super().__init__()
        self.store = CalendarStore()
        self.owner = make_owner(self.store, self.transport, self.clock)

    def calendar(self, command: str, request_id: str, tenant: str = "t",
                 exclusions: list[dict[str, Any]] | None = None, **fields: Any) -> list[Outgoing]:
        sent = len(self.transport.transactions)
        self.offset += 1
        self.send(inbound(command, {"request_id": request_id, "tenant": tenant,
                                    "name": fields.pop("name", "holidays"),
                                    "description": "d", "exclusions": exclusions or [],
                                    "at": T0, "correlation_id": request_id, **fields},
                          self.offset))
        return [o for t in self.transport.transactions[sent:] for o in t]

    def create_job(self, spec: JobSpec, request_id: str, version: int = 0,
                   exclusions: list[dict[str, Any]] | None = None) -> UUID:
        message = create_message(spec, request_id)
        # create_message builds its record as a dict, still this test's to change.
        cast("dict[str, Any]", message.record).update(
            calendar_version=version, calendar_exclusions=exclusions or [])
        self.send(message)
        return job_id_for_request(spec.tenant, request_id)
