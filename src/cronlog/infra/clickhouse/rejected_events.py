"""ClickHouseRejectedEvents: where the history projector sets aside an event it cannot write.

One such event must not hold back every run's history behind it (DESIGN invariant 9). It is
kept here with its place in the log, so an operator can see why, fix the cause and re-project
it from the log (`cronlog replay`); `SELECT * FROM rejected_events` lists them.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.ports import InboundMessage

# Plain MergeTree with explicit partitioning: valid on ClickHouse 18.16 and current ones.
CREATE_REJECTED_EVENTS = """
CREATE TABLE IF NOT EXISTS {db}.rejected_events (
    rejected_at DateTime,
    topic String,
    partition UInt32,
    offset UInt64,
    event_type String,
    error String,
    body_base64 String
) ENGINE = MergeTree()
PARTITION BY toYYYYMMDD(rejected_at)
ORDER BY (topic, partition, offset)
"""

INSERT_REJECTED_EVENT = ("INSERT INTO {db}.rejected_events (rejected_at, topic, partition, "
                         "offset, event_type, error, body_base64) VALUES")

PING = "SELECT 1"


class ClickHouseRejectedEvents:
    def __init__(self, history: ClickHouseRunHistory) -> None:
        self._history = history

    def ensure_schema(self) -> None:
        self._history.execute(CREATE_REJECTED_EVENTS.replace("{db}", self._history.database))

    def reachable(self) -> bool:
        try:
            self._history.execute(PING)
        except Exception:  # whatever the reason, the store does not answer
            return False
        return True

    def set_aside(self, message: InboundMessage, error: str, at: datetime) -> None:
        self._history.execute(
            INSERT_REJECTED_EVENT.replace("{db}", self._history.database),
            [(at.astimezone(UTC).replace(tzinfo=None, microsecond=0), message.topic,
              message.partition, message.offset, message.name, error,
              base64.b64encode(message.raw).decode())])
