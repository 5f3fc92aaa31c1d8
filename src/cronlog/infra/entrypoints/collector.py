"""Python's cyclic garbage collector, as the long-running roles set it up (issue 34).

An owner cycle allocates a few hundred objects per run it fires (eventsourcing's events and
aggregates, Avro records, rows), almost none of them in reference cycles: reference
counting frees them. With the interpreter's default thresholds a young collection runs
every 700 allocations net of frees, a middle one every 10 of those, each walking what has
survived since, and the full ones walk the caches a scheduler keeps (the run cache, the
schedules' remembered answers, the decoded ids). py-spy put 5-8% of a scheduler's samples
each on the line that happened to allocate when a pass began (`Cursor.fetchall`, a
function's first line).

So a role, once its object graph is built:
- collects once and freezes what it holds (gc.freeze): modules, settings, clients and what
  they made at start are never walked again;
- runs a young collection every YOUNG allocations rather than 700, and a middle one every
  MIDDLE of those; full collections keep the interpreter's rule. Garbage in cycles still
  goes, a little later.

Measured (docs/cpu-per-run.md, "The garbage collector"): the scheduler's CPU per 1,000 runs
at 3,500 runs/s fell from 0.375-0.42 to 0.28-0.32 core-seconds.
"""

from __future__ import annotations

import gc

YOUNG = 50_000
MIDDLE = 20


def settle_collector() -> None:
    gc.collect()
    gc.freeze()
    _, _, old = gc.get_threshold()
    gc.set_threshold(YOUNG, MIDDLE, old)
