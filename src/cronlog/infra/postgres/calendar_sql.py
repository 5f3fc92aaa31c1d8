"""The SQL of the calendar projection (issue 20; calendars, calendar_subscribers and
jobs.calendar in schema.sql) and of the owner's reads of it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from cronlog.domain.exclusions import AppliedCalendar, Exclusions

# A replayed event (catch-up, rebuild) never takes a calendar back to an older version.
PUT_CALENDAR = """
INSERT INTO calendars (tenant, name, calendar_id, partition, version, description,
                       exclusions, subscribers, created_at, updated_at)
VALUES (%(tenant)s, %(name)s, %(calendar_id)s, %(partition)s, %(version)s, %(description)s,
        %(exclusions)s::jsonb, 0, %(updated_at)s, %(updated_at)s)
ON CONFLICT (tenant, name) DO UPDATE
SET version = EXCLUDED.version, description = EXCLUDED.description,
    exclusions = EXCLUDED.exclusions, updated_at = EXCLUDED.updated_at, applied_at = now()
WHERE calendars.version < EXCLUDED.version
"""

SUBSCRIBE = """
INSERT INTO calendar_subscribers (calendar_id, job_id, partition)
VALUES (%(calendar_id)s, %(job_id)s, %(partition)s)
ON CONFLICT DO NOTHING
"""

UNSUBSCRIBE = """
DELETE FROM calendar_subscribers WHERE calendar_id = %(calendar_id)s AND job_id = %(job_id)s
"""

# The count the api shows (Calendar.jobs), kept beside the list its owner publishes to.
COUNT_SUBSCRIBERS = """
UPDATE calendars SET subscribers =
    (SELECT count(*) FROM calendar_subscribers s WHERE s.calendar_id = %(calendar_id)s)
WHERE calendar_id = %(calendar_id)s
"""

SET_JOB_CALENDAR = "UPDATE jobs SET calendar = %(calendar)s::jsonb WHERE job_id = %(job_id)s"

# Cleared unless it is the calendar the job's spec (still) names.
CLEAR_JOB_CALENDAR = """
UPDATE jobs SET calendar = NULL
WHERE job_id = %(job_id)s AND calendar IS NOT NULL
  AND (%(name)s::text IS NULL OR calendar->>'name' <> %(name)s::text)
"""

SELECT_CALENDAR = """
SELECT c.calendar_id, c.tenant, c.name, c.version, c.description, c.exclusions,
       c.created_at, c.updated_at,
       ARRAY(SELECT s.job_id FROM calendar_subscribers s
             WHERE s.calendar_id = c.calendar_id ORDER BY s.job_id)
FROM calendars AS c WHERE c.calendar_id = %(calendar_id)s
"""


def applied_to_json(calendar: AppliedCalendar) -> str:
    return json.dumps({"name": calendar.name, "version": calendar.version,
                       "found": calendar.found, "exclusions": calendar.exclusions.texts()})


def applied_from_json(value: Mapping[str, Any] | None) -> AppliedCalendar | None:
    """The jobs.calendar column (psycopg reads jsonb as a dict)."""
    if not value:
        return None
    return _applied(str(value["name"]), int(value["version"]), bool(value["found"]),
                    tuple(value.get("exclusions") or ()))


# The followers of one calendar version hold the same days: parsed once (about 1 ms for 300
# ranges, for every job loaded, due or applying an update) and shared, with the compiled
# form the search builds from them (both immutable). At most about 100 KB an entry.
@lru_cache(maxsize=256)
def _applied(name: str, version: int, found: bool, texts: tuple[str, ...]) -> AppliedCalendar:
    return AppliedCalendar(name=name, version=version, found=found,
                           exclusions=Exclusions.parse(texts, "jobs.calendar"))


# -- a calendar's followers by reference (issue 33, commands/owner/calendar_followers.py) --------
# The version and days a follower applies: no subscribers (up to 10,000 ids) read with them.
SELECT_PUBLISHED_CALENDAR = """
SELECT name, version, exclusions FROM calendars WHERE calendar_id = %(calendar_id)s
"""

# The versions of the calendars due jobs follow, read once a cycle (the unique index on
# calendar_id), without their days: a job holding an older version is applied before it
# fires.
CALENDAR_VERSIONS = """
SELECT calendar_id, version FROM calendars WHERE calendar_id = ANY(%(calendar_ids)s)
"""

# Jobs of the owned partitions (the partial index jobs_following) behind their calendar's
# row, read once per takeover. Only jobs that found their calendar follow it (a job told
# "not found" is not a subscriber, docs/calendars.md), and deleted jobs follow none.
STALE_FOLLOWERS = """
SELECT j.job_id, c.calendar_id, c.version
FROM jobs AS j
JOIN calendars AS c ON c.tenant = j.tenant AND c.name = j.calendar->>'name'
WHERE j.partition = ANY(%(partitions)s) AND j.calendar IS NOT NULL
  AND j.status <> 'deleted' AND (j.calendar->>'found')::boolean
  AND (j.calendar->>'version')::bigint < c.version
"""

# The same, of calendars applied within an interval (the database's clock, as applied_at):
# from the calendars (calendars_by_applied_at) through their subscribers, so its cost is the
# followers of recent updates, not every following job of the partitions.
RECENTLY_STALE_FOLLOWERS = """
SELECT j.job_id, c.calendar_id, c.version
FROM calendars AS c
JOIN calendar_subscribers AS s ON s.calendar_id = c.calendar_id
JOIN jobs AS j ON j.job_id = s.job_id
WHERE c.applied_at >= now() - %(within)s::interval
  AND j.partition = ANY(%(partitions)s) AND j.calendar IS NOT NULL
  AND j.status <> 'deleted' AND j.calendar->>'name' = c.name
  AND (j.calendar->>'found')::boolean AND (j.calendar->>'version')::bigint < c.version
"""
