"""The SQL of the calendar projection (issue 20; calendars, calendar_subscribers and
jobs.calendar in schema.sql) and of the owner's reads of it."""

from __future__ import annotations

import json
from collections.abc import Mapping
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
    exclusions = EXCLUDED.exclusions, updated_at = EXCLUDED.updated_at
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
    return AppliedCalendar(name=str(value["name"]), version=int(value["version"]),
                           found=bool(value["found"]),
                           exclusions=Exclusions.parse(value.get("exclusions") or (),
                                                       "jobs.calendar"))
