"""Held runs (overlap policy BUFFER_ONE, a backfill that must not overlap): which one of a
job's runs is dispatched next, once the others have ended."""

from __future__ import annotations

from cronlog.domain.run import Run


def next_to_release(unfinished: list[Run]) -> Run | None:
    """The held run to dispatch now: the oldest one, once no other run of its job is going."""
    live = [r for r in unfinished if not r.finished]
    if any(not r.held for r in live):
        return None
    held = sorted((r for r in live if r.held), key=lambda r: (r.not_before, r.scheduled_at))
    return held[0] if held else None
