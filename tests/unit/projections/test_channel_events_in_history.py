"""Alert channels' events (issue 37) on the job-events topic: the history projector routes
them with the job events, whose history skips them (they name no job), and the state
projection writes each to the channels table in order."""

from __future__ import annotations

from typing import Any

from cronlog.domain.catalogue import ChannelEvent
from cronlog.infra.avro.codec import AvroCodec
from cronlog.projections.combined_history import CombinedHistoryProjector
from cronlog.projections.history import HistoryProjector
from cronlog.projections.job_history import JobHistoryProjector
from cronlog.projections.state import apply_job_event
from tests.support.clickhouse_history import ClickHouseLikeHistory
from tests.unit.avro.examples import EXAMPLES

CODEC = AvroCodec()


def decoded(name: str) -> tuple[str, dict[str, Any]]:
    return CODEC.decode(CODEC.encode(name, EXAMPLES[(name, 1)]))


def test_the_history_skips_every_channel_event() -> None:
    store = ClickHouseLikeHistory()
    projector = CombinedHistoryProjector(HistoryProjector(store), JobHistoryProjector(store))
    projector.apply_batch([decoded(name) for name in ChannelEvent])
    assert store.final_runs() == []


class Changes:
    def __init__(self) -> None:
        self.changes: list[Any] = []

    def change_channel(self, change: Any) -> None:
        self.changes.append(change)


def test_the_state_projection_hands_each_channel_event_to_its_writer() -> None:
    writer = Changes()
    for name in ChannelEvent:
        event, record = decoded(name)
        apply_job_event(writer, 3, event, record, b"")  # type: ignore[arg-type]
    assert [c.event for c in writer.changes] == list(ChannelEvent)
    created, updated, rotated, deleted, restored = writer.changes
    assert created.partition == 3 and created.values["kind"] == "webhook"
    assert updated.values["recipients"] == ["ops@example.com", "dev@example.com"]
    assert rotated.values == {"secret_rotation": 1} and deleted.values == {}
    assert restored.values["secret_rotation"] == 2 and restored.values["kind"] == "email"
    assert all("secret" not in key for c in writer.changes for key in c.params()
               if key != "secret_rotation")
