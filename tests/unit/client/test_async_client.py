"""AsyncCronlogClient: every call of the sync client, awaited without blocking the event loop,
with the sync client's deadlines, request ids and errors."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import grpc
import pytest

from cronlog.client import ApiError, AsyncCronlogClient, CronlogClient
from cronlog.client.aio import NOT_OFFLOADED
from cronlog.v1 import job_service_pb2 as pb
from tests.unit.client.test_client import Refusal, Rpc, client_of, refuse


def test_every_call_of_the_sync_client_has_an_async_twin() -> None:
    calls = {name for name, member in vars(CronlogClient).items()
             if inspect.isfunction(member) and not name.startswith("_")} - NOT_OFFLOADED
    twins = {name for name in vars(AsyncCronlogClient) if not name.startswith("_")}
    assert calls <= twins, f"no async twin: {sorted(calls - twins)}"
    for name in calls:
        assert inspect.iscoroutinefunction(getattr(AsyncCronlogClient, name)), name
        assert getattr(AsyncCronlogClient, name).__doc__ == getattr(CronlogClient, name).__doc__


def test_a_slow_call_leaves_the_event_loop_free_and_answers_as_the_sync_client() -> None:
    release = threading.Event()

    def slow_get(request: Any) -> Any:
        # Released only by the loop's own task while this call waits: a call that blocked
        # the loop would wait here in vain.
        if not release.wait(5):
            raise AssertionError("the event loop was blocked while the call waited")
        return pb.GetJobResponse(job=pb.Job(job_id=request.job_id, version=3))

    rpc = Rpc(slow_get)
    client = AsyncCronlogClient(client_of(token="t0k", GetJob=rpc))

    async def main() -> tuple[pb.Job, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while not release.is_set():
                ticks += 1
                if ticks == 5:
                    release.set()  # only a free loop gets here: the call is still waiting
                await asyncio.sleep(0.01)

        job, _ = await asyncio.gather(client.get_job("j1"), tick())
        return job, ticks

    job, ticks = asyncio.run(main())
    assert (job.job_id, job.version) == ("j1", 3) and ticks >= 5
    (_, timeout, metadata), = rpc.calls
    assert timeout == 1.0 and ("authorization", "Bearer t0k") in metadata


def test_a_refusal_is_an_api_error_and_a_change_gets_a_request_id() -> None:
    pause = Rpc(lambda request: pb.PauseJobResponse(job=pb.Job(job_id=request.job_id)))
    refused = Rpc(refuse(Refusal(grpc.StatusCode.NOT_FOUND, "job j2 not found")))
    client = AsyncCronlogClient(client_of(PauseJob=pause, ResumeJob=refused))

    async def main() -> pb.Job:
        async with client:
            with pytest.raises(ApiError) as raised:
                await client.resume_job("j2")
            assert raised.value.code == grpc.StatusCode.NOT_FOUND
            return await client.pause_job("j1")

    assert asyncio.run(main()).job_id == "j1"
    assert pause.calls[0][0].request_id, "a new request id for a change"
