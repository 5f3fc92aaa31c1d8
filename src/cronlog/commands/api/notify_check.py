"""The api's check of a job's notify rule before it reaches the owner (docs/alerts.md): each
channel it names is a live channel of the job's tenant.

Channels live on partitions of their own, so the job's owner cannot look; this is the error
the user sees, with the field. A channel deleted after the check (a race, or later) is the
notifier's to find: the delivery fails, recorded, and the tenant's other channels are told.
Another tenant's channel reads exactly like a missing one (invariant 10).

Cost (invariant 12): one read of the tenant's live channels, one page of at most
CHANNEL_PAGE (a tenant has at most MAX_CHANNELS_PER_TENANT), per tenant per request or
batch: `known` keeps what was read across a CreateJobs batch."""

from __future__ import annotations

from cronlog.commands.api.ports import ChannelReader
from cronlog.domain.channel import MAX_CHANNELS_PER_TENANT
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.notify_rule import CHANNELS_FIELD
from cronlog.domain.spec import JobSpec

# Room above the limit for creates that raced past it (the limit is a guard, not a quota).
CHANNEL_PAGE = 5 * MAX_CHANNELS_PER_TENANT


class ChannelNotFound(InvalidSpec):
    def __init__(self, index: int, name: str) -> None:
        super().__init__(f"{CHANNELS_FIELD}[{index}]", f"channel {name!r} not found")
        self.name = name


def check_notify_channels(spec: JobSpec, reader: ChannelReader,
                          known: dict[str, frozenset[str]] | None = None) -> None:
    """Raises ChannelNotFound naming the first channel of `spec.notify` the tenant has not."""
    if spec.notify is None:
        return
    known = {} if known is None else known
    names = known.get(spec.tenant)
    if names is None:
        page, _ = reader.channels(spec.tenant, CHANNEL_PAGE, None)
        names = known[spec.tenant] = frozenset(view.name for view in page)
    for index, name in enumerate(spec.notify.channels):
        if name not in names:
            raise ChannelNotFound(index, name)
