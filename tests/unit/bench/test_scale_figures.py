"""The scale workload's job mix, burst minute and table, from made-up values."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from cronlog.domain.schedule import preview
from cronlog.domain.spec import JobSpec
from cronlog_dev.bench.options import add_arguments, from_namespace
from cronlog_dev.bench.partitions_figures import default_kafka
from cronlog_dev.bench.rss import RssPeak
from cronlog_dev.bench.scale_figures import (
    ZONES,
    ScaleResult,
    background_cron,
    burst_cron,
    creation,
    every_minute_cron,
    idle_cpu,
    job_mix,
    plan_burst,
    render_scale,
)
from cronlog_dev.bench.stats import BurstFigures, LagSummary
from cronlog_dev.bench.takeover_figures import takeover


def _fires(cron: str, zone: str, after: datetime, count: int) -> list[datetime]:
    """Fire times as cronlog's own schedule computes them."""
    spec = JobSpec(name="j", tenant="t", queue="default", handler="echo", cron=cron,
                   time_zone=zone)
    return list(preview(spec.schedule(), after, count))


def test_the_mix_is_five_percent_every_minute_the_burst_and_the_rest_hourly_and_daily() -> None:
    mix = job_mix(1_000_000, 100_000)
    assert (mix.every_minute, mix.burst) == (50_000, 100_000)
    assert mix.hourly + mix.daily == 850_000
    assert abs(mix.hourly - mix.daily) <= 1
    assert mix.total == 1_000_000
    odd = job_mix(20_001, 5_000)
    assert odd.total == 20_001


def test_a_burst_larger_than_the_jobs_left_is_refused_naming_the_option() -> None:
    with pytest.raises(ValueError, match="scale_burst_jobs"):
        job_mix(1000, 990)


def test_fifty_real_zones_and_every_background_cron_parses() -> None:
    assert len(set(ZONES)) == 50
    for zone in ZONES:
        ZoneInfo(zone)
    crons = [background_cron(i) for i in range(2 * 24 * 60)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for cron, zone in crons[:200]:
        a, b = _fires(cron, zone, start, 2)
        assert (b - a).total_seconds() in (3600, 86_400)
    hourly = [c for c, _ in crons if c.endswith(" * * * *")]
    daily = [c for c, _ in crons if not c.endswith(" * * * *")]
    assert len(hourly) == len(daily)
    # Spread: every minute of the hour and every hour of the day is used.
    assert {c.split()[0] for c, _ in crons} == {str(m) for m in range(60)}
    assert {c.split()[1] for c in daily} == {str(h) for h in range(24)}
    assert {z for _, z in crons} == set(ZONES)


def test_every_minute_jobs_fire_each_minute_at_their_own_second() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    seconds = set()
    for i in range(60):
        a, b = _fires(every_minute_cron(i), "UTC", start, 2)
        assert (b - a).total_seconds() == 60
        seconds.add(a.second)
    assert seconds == set(range(60))


def test_the_burst_is_at_a_whole_minute_after_creation_and_the_lookahead() -> None:
    now = datetime(2026, 1, 1, 12, 0, 10, tzinfo=UTC).timestamp()
    # 150,000 jobs at 1,500/s: 100 s, x 1.5 = 150 s; + 10 s + 60 s lookahead = 12:03:50.
    due = plan_burst(now, 150_000, 1_500, 60, 10, 900)
    assert due % 60 == 0
    assert due == datetime(2026, 1, 1, 12, 4, tzinfo=UTC).timestamp()
    assert burst_cron(due) == "4 * * * *"
    (first,) = _fires(burst_cron(due), "UTC", datetime.fromtimestamp(now, UTC), 1)
    assert first.timestamp() == due


def test_a_smaller_safety_factor_plans_the_burst_sooner() -> None:
    now = datetime(2026, 1, 1, 12, 0, 10, tzinfo=UTC).timestamp()
    # 150,000 jobs at 500/s: 300 s; x 1.15 = 345 s (x 1.5 = 450 s); + 10 s + 150 s.
    sooner = plan_burst(now, 150_000, 500, 150, 10, 900, safety=1.15)
    assert sooner == datetime(2026, 1, 1, 12, 9, tzinfo=UTC).timestamp()
    assert plan_burst(now, 150_000, 500, 150, 10, 900) == datetime(
        2026, 1, 1, 12, 11, tzinfo=UTC).timestamp()


def test_the_burst_is_never_beyond_the_longest_lead() -> None:
    now = 1_000_000.0
    due = plan_burst(now, 10**9, 1.0, 60, 10, 900)
    assert due - now <= 900 + 60 + 60


def test_creation_and_idle_figures() -> None:
    c = creation(20_000, 2, 10.0, 16.0)
    assert (c.per_second_answered, c.per_second_stored) == (2000.0, 1250.0)
    assert creation(10, 0, 1.0, None).per_second_stored is None
    idle = idle_cpu(30.0, {"scheduler-1": 0.3, "scheduler-2": 0.6})
    assert idle.per_second == pytest.approx(0.03)


@dataclass
class _Pgq:
    rows_enqueued: int = 1_000_000
    enqueue_seconds: float = 100.0
    enqueue_per_second: float = 10_000.0
    table_mb: float = 400.0
    burst_jobs: int = 100_000
    burst_started: int = 100_000
    lag_p50_ms: float | None = 20_000.0
    lag_p99_ms: float | None = 40_000.0
    lag_max_ms: float | None = 41_000.0
    burst_all_started_seconds: float | None = 41.0


def _result() -> ScaleResult:
    mix = job_mix(1_000_000, 100_000)
    return ScaleResult(
        "cronlog", mix.total, 1024, mix, 2, 2, 2, 1000, 8,
        creation(850_000, 0, 600.0, 650.0), creation(150_000, 0, 100.0, 110.0), 2048.0,
        idle_cpu(30.0, {"scheduler-1": 0.15, "scheduler-2": 0.15}),
        "2026-01-01T12:04:00+00:00", "4 * * * *",
        BurstFigures(100_000, 100_000, 20.0, 5000.0, LagSummary(100_000, 5_000.0, 10_000.0,
                                                                  20_000.0)),
        takeover("SIGTERM share", 100.0, 512, 101.0, 103.0, [100.5], []),
        {"scheduler-1": RssPeak(300.0, 310.0), "scheduler-2": RssPeak(320.0, None),
         "worker-1": RssPeak(100.0, 100.0), "api-1": RssPeak(90.0, 95.0)},
        {"start": 30.0, "create": 650.0}, {"api-1": 300.0}, ["a note"])


def test_the_table_puts_both_sides_with_ratios_and_the_phases() -> None:
    text = render_scale(_result(), _Pgq())
    lines = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:5]]
             for line in text.splitlines() if line.startswith("| scale")}
    # 1,000,000 jobs in 700 s answered: 1,428.6/s; pgqueuer 10,000/s.
    assert lines["scale: bulk creation/enqueue jobs/s"] == ["1,429", "10,000", "0.14"]
    assert lines["scale burst: start lag p99 ms"] == ["10,000", "40,000", "0.25"]
    assert lines["scale burst: runs started by the cap"][:2] == ["100000/100000",
                                                                 "100000/100000"]
    assert lines["scale: Postgres MB (cronlog: database; pgqueuer: table)"] == [
        "2,048", "400", "5.12"]
    assert lines["scale: peak RSS MiB, largest scheduler"][:2] == ["320", "-"]
    assert lines["scale: idle scheduler CPU s/s (all schedulers)"][0] == "0.01"
    assert lines["scale takeover: all of a scheduler's (512) s"][0] == "3.00"
    assert "cronlog scale phases: start 30 s, create 650 s" in text


def test_either_side_alone_still_renders() -> None:
    assert "| scale burst: start lag p50 ms" in render_scale(None, _Pgq())
    alone = render_scale(_result(), None)
    assert "scale takeover: first partition s" in alone


def test_the_result_survives_json() -> None:
    doc = json.loads(json.dumps(asdict(_result())))
    assert doc["creation"]["per_second_answered"] == pytest.approx(1416.7)
    assert doc["mix"]["every_minute"] == 50_000
    assert doc["idle"]["per_second"] == pytest.approx(0.01)


def test_scale_is_asked_for_by_name_with_its_sizes() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert "scale" not in from_namespace(parser.parse_args([])).workloads
    options = from_namespace(parser.parse_args(
        ["--workloads", "scale", "--scale-jobs", "20000", "--scale-burst-jobs", "5000",
         "--scale-partitions", "64", "--owner-batch", "8000"]))
    assert (options.workloads, options.scale_jobs, options.scale_burst_jobs,
            options.scale_partitions, options.owner_batch) == (
        ("scale",), 20_000, 5_000, 64, 8000)
    defaults = from_namespace(parser.parse_args(["--workloads", "scale"]))
    assert (defaults.scale_jobs, defaults.scale_burst_jobs, defaults.scale_partitions,
            defaults.owner_batch) == (1_000_000, 100_000, 1024, 0)
    # The Kafka partitions: L/16 unless given (issue 34's layout, docs/partitions.md).
    assert defaults.scale_kafka_partitions == 0 and default_kafka(1024) == 64
    assert from_namespace(parser.parse_args(
        ["--workloads", "scale", "--scale-kafka-partitions", "128"])).scale_kafka_partitions == 128
    with pytest.raises(SystemExit, match="scale_burst_jobs"):
        from_namespace(parser.parse_args(["--workloads", "scale", "--scale-jobs", "100",
                                          "--scale-burst-jobs", "99"]))


def test_kafka_settings_for_every_client_are_checked_as_the_service_checks_them() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = from_namespace(parser.parse_args(
        ["--kafka-config", "fetch.wait.max.ms=100", "--kafka-config", "fetch.min.bytes=65536"]))
    assert options.kafka_config == (("fetch.wait.max.ms", "100"), ("fetch.min.bytes", "65536"))
    assert from_namespace(parser.parse_args([])).kafka_config == ()
    with pytest.raises(SystemExit, match=r"--kafka-config: .*fetch\.wait\.max\.mss"):
        from_namespace(parser.parse_args(["--kafka-config", "fetch.wait.max.mss=100"]))
