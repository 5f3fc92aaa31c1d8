"""AsyncCronlogClient: CronlogClient's calls for asyncio programs (docs/client.md, "From
asyncio"). Each call runs the sync client's method in a worker thread (asyncio.to_thread):
the event loop never waits on the api, and every behaviour (deadlines, retries of a call the
api did not take, request ids, ApiError) is the sync client's, not a second copy of it. The
paging iterators (`all_jobs`, ...) stay the sync client's: page with the `list_*` calls."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar

from cronlog.client.client import CronlogClient, Retries, Timeouts, connect

P = ParamSpec("P")
R = TypeVar("R")

# CronlogClient's methods that are not calls of the api, or that iterate pages.
NOT_OFFLOADED = frozenset({"with_options", "close", "all_jobs", "all_runs", "all_calendars",
                           "all_channels"})


def _offloaded(method: Callable[Concatenate[CronlogClient, P], R]
               ) -> Callable[Concatenate[AsyncCronlogClient, P], Awaitable[R]]:
    async def call(client: AsyncCronlogClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, client.sync, *args, **kwargs)

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


class AsyncCronlogClient:
    """`await client.create_job(spec)` and every other call of CronlogClient, by the same
    names and arguments."""

    def __init__(self, sync: CronlogClient) -> None:
        self.sync = sync

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncCronlogClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    create_job = _offloaded(CronlogClient.create_job)
    create_job_answer = _offloaded(CronlogClient.create_job_answer)
    create_jobs = _offloaded(CronlogClient.create_jobs)
    get_job = _offloaded(CronlogClient.get_job)
    list_jobs = _offloaded(CronlogClient.list_jobs)
    update_job = _offloaded(CronlogClient.update_job)
    update_job_answer = _offloaded(CronlogClient.update_job_answer)
    pause_job = _offloaded(CronlogClient.pause_job)
    resume_job = _offloaded(CronlogClient.resume_job)
    delete_job = _offloaded(CronlogClient.delete_job)
    restore_job = _offloaded(CronlogClient.restore_job)
    trigger_job = _offloaded(CronlogClient.trigger_job)
    backfill_job = _offloaded(CronlogClient.backfill_job)
    get_run = _offloaded(CronlogClient.get_run)
    wait_for_run = _offloaded(CronlogClient.wait_for_run)
    list_runs = _offloaded(CronlogClient.list_runs)
    cancel_run = _offloaded(CronlogClient.cancel_run)
    redrive_run = _offloaded(CronlogClient.redrive_run)
    redrive_dead_letters = _offloaded(CronlogClient.redrive_dead_letters)
    preview_schedule = _offloaded(CronlogClient.preview_schedule)
    verify_history = _offloaded(CronlogClient.verify_history)
    what_if = _offloaded(CronlogClient.what_if)
    create_calendar = _offloaded(CronlogClient.create_calendar)
    get_calendar = _offloaded(CronlogClient.get_calendar)
    update_calendar = _offloaded(CronlogClient.update_calendar)
    list_calendars = _offloaded(CronlogClient.list_calendars)
    create_channel = _offloaded(CronlogClient.create_channel)
    update_channel = _offloaded(CronlogClient.update_channel)
    delete_channel = _offloaded(CronlogClient.delete_channel)
    rotate_channel_secret = _offloaded(CronlogClient.rotate_channel_secret)
    get_channel = _offloaded(CronlogClient.get_channel)
    list_channels = _offloaded(CronlogClient.list_channels)
    test_channel = _offloaded(CronlogClient.test_channel)
    list_workers = _offloaded(CronlogClient.list_workers)
    list_alert_deliveries = _offloaded(CronlogClient.list_alert_deliveries)


def connect_async(address: str, *, token: str | None = None, ca_file: str | None = None,
                  timeouts: Timeouts | None = None, retries: Retries | None = None
                  ) -> AsyncCronlogClient:
    """connect()'s client for asyncio: `async with connect_async(address) as client:`
    (timeouts and retries: the sync client's defaults when not given)."""
    return AsyncCronlogClient(connect(address, token=token, ca_file=ca_file,
                                      timeouts=timeouts or Timeouts(),
                                      retries=retries or Retries()))
