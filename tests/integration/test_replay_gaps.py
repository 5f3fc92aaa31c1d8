"""Replay and audit refuse a log that no longer holds what they need, against the real
broker: records deleted from a partition's beginning (as retention would) are named, with
the partition, the first offset still held and when it was written, and the command exits
non-zero instead of starting at the low watermark."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config
from cronlog.infra.kafka.topics import ensure_core_topics
from tests.support.cli import cronlog, set_settings_env
from tests.support.event_log import WrittenJob, project_live, write_job

pytestmark = pytest.mark.integration


@pytest.fixture
def cli_env(isolated: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    return set_settings_env(isolated, monkeypatch)


def delete_before(settings: Settings, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient(admin_config(settings))
    for future in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        assert future.result(timeout=30).low_watermark == offset


def written_and_projected(settings: Settings) -> WrittenJob:
    ensure_core_topics(settings)
    written = write_job(settings, runs=3)
    project_live(settings, written)
    return written


def test_audit_and_replay_refuse_job_events_missing_their_beginning(
        cli_env: Settings, capfd: pytest.CaptureFixture[str]) -> None:
    settings = cli_env
    written = written_and_projected(settings)
    job = str(written.job_id)

    # Nothing missing: both read the whole log.
    code, out, err = cronlog(capfd, "audit", "job", job)
    assert code == 0, err
    assert "JobCreated" in out and out.count("AttemptSucceeded") == 3
    code, out, err = cronlog(capfd, "replay")
    assert code == 0, out + err
    assert "postgres jobs: 1 rebuilt, 1 live, 0 mismatches" in out
    assert "clickhouse runs: 3 rebuilt, 3 live, 0 mismatches" in out

    delete_before(settings, settings.job_events_topic, written.partition, 1)
    expected = (f"{settings.job_events_topic} partition {written.partition}: offsets 0 to 0 "
                "are no longer in the log; its earliest message still held is offset 1, "
                "written 20")
    for argv in (("audit", "job", job), ("replay",), ("replay", "--rebuild")):
        code, out, err = cronlog(capfd, *argv)
        assert code == 1, (argv, out, err)
        assert "the log no longer holds events it needs" in err, (argv, err)
        assert expected in err, (argv, err)
        assert "JobCreated" not in out and "rebuilt" not in out, (argv, out)


def test_run_events_missing_inside_the_history_horizon_are_a_gap(
        cli_env: Settings, capfd: pytest.CaptureFixture[str]) -> None:
    settings = cli_env
    written = written_and_projected(settings)
    # Retention would never remove events this young: the history still shows their runs.
    delete_before(settings, settings.run_events_topic, written.partition, 2)
    for argv in (("audit", "job", str(written.job_id)), ("replay",), ("replay", "--rebuild")):
        code, _, err = cronlog(capfd, *argv)
        assert code == 1, (argv, err)
        assert (f"{settings.run_events_topic} partition {written.partition}: offsets 0 to 1 "
                "are no longer in the log, within the history horizon (from ") in err, err
        assert "its earliest message still held is offset 2, written 20" in err, err
    # The other partitions, and the job events, are whole: they are not named.
    assert err.count("partition") == 1, err
