"""The history projector survives a ClickHouse restart without loss or duplicates."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from cronlog.infra.config import Settings
from cronlog.infra.entrypoints.replay import rebuild_clickhouse
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.stack.local_stack import LocalStack
from tests.e2e.conftest import start_service, stop_service
from tests.support.polling import TimedOut, wait_for

pytestmark = pytest.mark.chaos


def test_history_survives_a_clickhouse_restart(local_stack: LocalStack | None,
                                               stack_settings: Settings) -> None:
    if local_stack is None:
        pytest.skip("restarts ClickHouse, so it needs the servers this session started")
    service = start_service(stack_settings, "history-restart")
    try:
        stub = pb_grpc.JobServiceStub(service.channel)
        tenant = "ch-" + uuid.uuid4().hex[:6]
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        end = start + timedelta(seconds=11)
        expected = 0
        for i in range(5):
            spec = pb.JobSpec(name=f"j{i}", tenant=tenant, handler="echo", cron="* * * * * *")
            spec.start_at.FromDatetime(start)
            spec.end_at.FromDatetime(end)
            job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                                 timeout=30).job
            # A job created after start_at fires from its creation on, not before.
            first = job.next_fire_at.ToDatetime(tzinfo=UTC)
            expected += int((end - first).total_seconds()) + 1
        while datetime.now(UTC) < start + timedelta(seconds=4):
            time.sleep(0.1)
        local_stack.clickhouse.stop()
        time.sleep(3)  # runs keep finishing while the history store is away
        local_stack.clickhouse.start()

        seen: Counter[str] = Counter()

        def all_in_history() -> bool:
            runs = stub.ListRuns(pb.ListRunsRequest(tenant=tenant, page_size=100),
                                 timeout=10).runs
            seen.clear()
            seen.update(pb.RunStatus.Name(r.status) for r in runs)
            return len(runs) == expected and all(
                r.status == pb.RUN_STATUS_SUCCEEDED for r in runs)

        try:
            wait_for(all_in_history, 90, f"all {expected} runs succeeded in history")
        except TimedOut as exc:
            # What the history held, and what the projector went through, name the cause.
            warnings = [line[:300] for line in
                        (service.log_dir / "projector.log").read_text().splitlines()
                        if " WARNING cronlog" in line or " ERROR " in line]
            raise AssertionError(f"{exc}; history by status: {dict(seen)}; the projector's "
                                 f"warnings and errors: {warnings[-20:]}") from None
        settings = service.settings
        assert isinstance(settings, Settings)
        comparison = rebuild_clickhouse(settings, f"{settings.clickhouse_database}_rebuilt")
        assert comparison.mismatches == []
        assert comparison.rebuilt == comparison.live == expected
        restarted = (service.log_dir / "projector.log").read_text()
        assert "history store unavailable" in restarted, "the restart was noticed and outlived"
    finally:
        stop_service(service)
