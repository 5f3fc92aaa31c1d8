"""When a workload's jobs become due: far enough ahead that creating them ends first."""

from __future__ import annotations

import math


def plan_due(now: float, count: int, creation_rate: float, min_lead: float,
             max_lead: float, safety: float = 1.5) -> float:
    """A whole second at which count jobs created at creation_rate per second (measured on a
    warm-up) can all be in place, with room to spare; never beyond max_lead seconds."""
    if creation_rate <= 0:
        lead = max_lead
    else:
        lead = min(max_lead, max(min_lead, count / creation_rate * safety + min_lead))
    return float(math.ceil(now + lead))
