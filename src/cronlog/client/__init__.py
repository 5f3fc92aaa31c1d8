"""The Python client of cronlog's api (docs/client.md): `connect(address, token=...)` gives a
CronlogClient whose methods take and return the api's protobuf messages
(`cronlog.v1.job_service_pb2`), and raise ApiError when the api refuses; `connect_async`
gives an AsyncCronlogClient with the same calls for asyncio programs."""

from cronlog.client.aio import AsyncCronlogClient, connect_async
from cronlog.client.client import CronlogClient, Retries, Timeouts, channel_to, connect
from cronlog.client.errors import ApiError
from cronlog.client.paging import Page, every_item
from cronlog.client.run_waiting import ENDED_RUN_STATUSES, RunWaitTimeout
from cronlog.v1 import job_service_pb2 as messages

__all__ = ["ENDED_RUN_STATUSES", "ApiError", "AsyncCronlogClient", "CronlogClient", "Page",
           "Retries", "RunWaitTimeout", "Timeouts", "channel_to", "connect", "connect_async",
           "every_item", "messages"]
