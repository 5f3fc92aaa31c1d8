"""The SQL of the channel projection (issue 37; `channels` in schema.sql) and of the
owner's read of it. Each statement applies one event and is idempotent under replay
(catch-up, rebuild): a row never goes back to an older version."""

from __future__ import annotations

from cronlog.domain.catalogue import ChannelEvent

# A channel's id is created once: a deleted channel keeps its row, restored by its name.
CHANNEL_CREATED = """
INSERT INTO channels (channel_id, partition, tenant, name, kind, target, recipients,
                      description, is_default, secret_rotation, version, deleted,
                      created_at, updated_at)
VALUES (%(channel_id)s, %(partition)s, %(tenant)s, %(name)s, %(kind)s, %(target)s,
        %(recipients)s, %(description)s, %(is_default)s, 0, %(version)s, false, %(at)s,
        %(at)s)
ON CONFLICT (channel_id) DO NOTHING
"""

CHANNEL_UPDATED = """
UPDATE channels SET target = %(target)s, recipients = %(recipients)s,
    description = %(description)s, is_default = %(is_default)s, version = %(version)s,
    updated_at = %(at)s
WHERE channel_id = %(channel_id)s AND version < %(version)s
"""

CHANNEL_SECRET_ROTATED = """
UPDATE channels SET secret_rotation = %(secret_rotation)s, version = %(version)s,
    updated_at = %(at)s
WHERE channel_id = %(channel_id)s AND version < %(version)s
"""

CHANNEL_DELETED = """
UPDATE channels SET deleted = true, is_default = false, version = %(version)s,
    updated_at = %(at)s
WHERE channel_id = %(channel_id)s AND version < %(version)s
"""

# A deleted channel created again: every setting anew, live, at its next rotation.
CHANNEL_RESTORED = """
UPDATE channels SET kind = %(kind)s, target = %(target)s, recipients = %(recipients)s,
    description = %(description)s, is_default = %(is_default)s,
    secret_rotation = %(secret_rotation)s, deleted = false, version = %(version)s,
    updated_at = %(at)s
WHERE channel_id = %(channel_id)s AND version < %(version)s
"""

STATEMENT_OF: dict[str, str] = {
    ChannelEvent.CREATED: CHANNEL_CREATED, ChannelEvent.UPDATED: CHANNEL_UPDATED,
    ChannelEvent.SECRET_ROTATED: CHANNEL_SECRET_ROTATED, ChannelEvent.DELETED: CHANNEL_DELETED,
    ChannelEvent.RESTORED: CHANNEL_RESTORED}

COLUMNS = ("channel_id, tenant, name, kind, target, recipients, description, is_default, "
           "secret_rotation, version, deleted, created_at, updated_at")
# The owner's read: the channel as its events left it, deleted or not.
SELECT_CHANNEL = f"SELECT {COLUMNS} FROM channels WHERE channel_id = %(channel_id)s"
