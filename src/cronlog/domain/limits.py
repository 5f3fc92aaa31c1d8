"""Per-tenant limits, so that one tenant's load cannot starve the others."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from cronlog.domain.errors import DomainError


class TenantLimitReached(DomainError):
    """A tenant is at one of its limits; the request is refused and nothing is written."""

    status = "RESOURCE_EXHAUSTED"


@dataclass(frozen=True)
class TenantLimit:
    # Jobs that exist (not deleted) at once.
    max_jobs: int = 10_000
    # Runs scheduled or running at once; fire times beyond it wait (see in_flight_share).
    max_in_flight: int = 1_000


@dataclass(frozen=True)
class TenantLimits:
    default: TenantLimit = TenantLimit()
    overrides: Mapping[str, TenantLimit] = field(default_factory=dict)

    def of(self, tenant: str) -> TenantLimit:
        return self.overrides.get(tenant, self.default)

    def check_new_job(self, tenant: str, existing_jobs: int) -> None:
        limit = self.of(tenant).max_jobs
        if existing_jobs >= limit:
            raise TenantLimitReached(f"tenant {tenant!r} has {existing_jobs} jobs; its limit is "
                                     f"{limit}: delete jobs or ask for a higher limit")

    def in_flight_share(self, tenant: str, owned_partitions: int, partitions: int) -> int:
        """A partition owner's part of the tenant's in-flight limit.

        Owners decide alone, each for its partitions, so each enforces the share of the
        limit its partitions carry; jobs spread evenly over partitions by their id.
        """
        limit = self.of(tenant).max_in_flight
        return max(1, math.ceil(limit * owned_partitions / max(1, partitions)))
