"""The api's check that a job's notify rule names channels of its own tenant, at one read of
the tenant's channels per request or batch."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from cronlog.commands.api.notify_check import CHANNEL_PAGE, ChannelNotFound, check_notify_channels
from cronlog.domain.notify_rule import notify_rule
from cronlog.domain.spec import JobSpec


@dataclass
class _Named:
    name: str


@dataclass
class _Channels:
    by_tenant: dict[str, list[str]]
    reads: list[tuple[str, int]] = field(default_factory=list)

    def channels(self, tenant: str, page_size: int,
                 page_token: str | None) -> tuple[list[_Named], str | None]:
        self.reads.append((tenant, page_size))
        return [_Named(n) for n in self.by_tenant.get(tenant, [])[:page_size]], None


def _spec(tenant: str, *channels: str) -> JobSpec:
    return JobSpec(name="n", tenant=tenant, queue="default", handler="echo",
                   cron="* * * * *", notify=notify_rule(list(channels)) if channels else None)


def test_channels_of_the_tenant_pass_and_another_tenants_read_as_missing() -> None:
    reader = _Channels({"acme": ["ops", "mail"], "other": ["pager"]})
    check_notify_channels(_spec("acme", "mail", "ops"), reader)  # type: ignore[arg-type]
    with pytest.raises(ChannelNotFound) as caught:
        check_notify_channels(_spec("acme", "ops", "pager"), reader)  # type: ignore[arg-type]
    assert caught.value.field == "spec.notify.channels[1]"
    assert "'pager' not found" in caught.value.message


def test_no_rule_reads_nothing_and_a_batch_reads_each_tenant_once() -> None:
    reader = _Channels({"acme": ["ops"], "beta": ["b"]})
    check_notify_channels(_spec("acme"), reader)  # type: ignore[arg-type]
    assert reader.reads == []
    known: dict[str, frozenset[str]] = {}
    for spec in [_spec("acme", "ops"), _spec("beta", "b"), _spec("acme", "ops")] * 50:
        check_notify_channels(spec, reader, known)  # type: ignore[arg-type]
    assert reader.reads == [("acme", CHANNEL_PAGE), ("beta", CHANNEL_PAGE)]
