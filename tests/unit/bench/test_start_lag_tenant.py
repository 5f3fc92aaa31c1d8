"""The scale workload's burst read from the committed run events (pure: records in)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronlog_dev.bench.start_lag import TenantRunStarts

T = datetime(2026, 12, 5, 3, 25, tzinfo=UTC)


def scheduled(run: str, tenant: str = "burst", at: datetime = T,
              trigger: str = "schedule") -> tuple[str, dict[str, object]]:
    return "RunScheduled", {"run_id": run, "tenant": tenant, "scheduled_at": at,
                            "trigger": trigger}


def started(run: str, seconds: float) -> tuple[str, dict[str, object]]:
    return "AttemptStarted", {"run_id": run, "started_at": T + timedelta(seconds=seconds)}


def test_only_the_tenants_runs_due_at_t_count_with_their_first_start() -> None:
    burst = TenantRunStarts("burst", T)
    for name, record in [
        scheduled("a"), scheduled("b"), scheduled("c"),
        scheduled("other-tenant", tenant="minute"),
        scheduled("later", at=T + timedelta(minutes=1)),
        scheduled("manual", trigger="manual"),
        started("a", 2.0), started("a", 1.5),  # a retry's start, then the first one's
        started("b", 0.25), started("other-tenant", 0.1), started("later", 61),
        started("manual", 3), started("unknown", 0.2),
    ]:
        burst.feed(name, record)
    assert burst.scheduled == 3
    assert burst.started == 2
    assert sorted(burst.first_starts()) == [T + timedelta(seconds=0.25),
                                            T + timedelta(seconds=1.5)]
