"""How many examples a property test draws: its own count in the main run, a quarter of it
(at least 10) on the other Pythons (scripts/unit-on-pythons.sh sets
CRONLOG_PROPERTY_EXAMPLES_SCALE=0.25).

The examples are derandomized (tests/conftest.py), so the other Pythons would draw the same
ones the main run has already checked against the same code; what they check there is the
interpreter, which every unit test still does, with every assertion. A quarter keeps them
from costing `make test` twice the main run's minutes of search on 2 cores."""

from __future__ import annotations

import os

SCALE_VARIABLE = "CRONLOG_PROPERTY_EXAMPLES_SCALE"
MIN_EXAMPLES = 10


def examples(count: int) -> int:
    raw = os.environ.get(SCALE_VARIABLE, "")
    if not raw:
        return count
    scale = float(raw)
    if not 0 < scale <= 1:
        raise ValueError(f"{SCALE_VARIABLE}: a fraction in (0, 1], not {raw!r}")
    return min(count, max(MIN_EXAMPLES, round(count * scale)))
