"""What an owner's inbox carries in the owner's unit tests: commands and worker reports,
and the specs they create."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from cronlog.domain.ids import job_id_for_request
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import spec_to_record
from cronlog.ports import InboundMessage
from tests.support.clock import T0


def inbound(name: str, record: dict[str, Any], offset: int = 0) -> InboundMessage:
    return InboundMessage("inbox", 0, offset, name, record, b"")


def create_message(spec: JobSpec, request_id: str = "r1") -> InboundMessage:
    job_id = job_id_for_request(spec.tenant, request_id)
    return inbound("CreateJob", {"request_id": request_id, "job_id": str(job_id), "at": T0,
                                 "spec": spec_to_record(spec)})


SPEC = JobSpec(name="n", tenant="t", queue="q1", handler="echo", cron="*/2 * * * * *",
               time_zone="Asia/Kolkata", payload=b"hello")


ONE_SHOT = JobSpec(name="n", tenant="t", queue="q1", handler="echo", at=T0 + timedelta(seconds=2),
                   heartbeat_timeout=timedelta(seconds=5), timeout=timedelta(minutes=1))


def report(name: str, run: Run, **fields: Any) -> InboundMessage:
    return inbound(name, {"run_id": str(run.id), "job_id": str(run.job_id), "attempt": 1,
                          "worker": "w", **fields})


DAILY = JobSpec(name="report", tenant="t", queue="q1", handler="echo", cron="0 9 * * *",
                calendar="holidays")


def days(*pairs: tuple[date, date]) -> list[dict[str, Any]]:
    return [{"first": a, "last": b} for a, b in pairs]


JAN_2 = days((date(2026, 1, 2), date(2026, 1, 2)))
