"""A misspelt CRONLOG_* variable is named, with the setting it was probably meant to be."""

from __future__ import annotations

import subprocess
import sys

from cronlog.infra.setting_names import known_names, unknown_settings


def test_a_misspelt_setting_is_named_with_the_closest_one() -> None:
    lines = unknown_settings({"CRONLOG_TENANT_MAX_INFLIGHT": "5", "CRONLOG_PARTITIONS": "8",
                              "CRONLOG_ANALYST_PASSWORD_ACME": "x", "CRONLOG_LOG_LEVEL": "INFO",
                              "CRONLOG_NOTHING_LIKE_IT_AT_ALL": "1", "HOME": "/root"})
    assert lines == [
        "CRONLOG_NOTHING_LIKE_IT_AT_ALL is not a setting of cronlog's; it is ignored",
        "CRONLOG_TENANT_MAX_INFLIGHT is not a setting of cronlog's (did you mean "
        "CRONLOG_TENANT_MAX_IN_FLIGHT?); it is ignored"]


def test_every_setting_of_the_configuration_page_is_known() -> None:
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `(CRONLOG_[A-Z0-9_]+)`", page, flags=re.MULTILINE))
    assert documented, "docs/configuration.md's tables of settings"
    known = known_names({})
    dev_only = {n for n in documented if n in {"CRONLOG_STATE_DIR", "CRONLOG_RUN_PORT_OFFSET",
                                               "CRONLOG_KAFKA_BROKERS", "CRONLOG_CACHE_DIR"}}
    assert documented - known - dev_only == set()


def test_a_bad_value_does_not_hide_the_names() -> None:
    lines = unknown_settings({"CRONLOG_PARTITIONS": "many", "CRONLOG_WORKER_SLOT": "4"})
    assert lines == ["CRONLOG_WORKER_SLOT is not a setting of cronlog's (did you mean "
                     "CRONLOG_WORKER_SLOTS?); it is ignored"]


def test_a_role_warns_at_start() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cronlog.infra.entrypoints.cli", "provision", "--print"],
        env={"CRONLOG_WORKER_SLOT": "4", "PATH": "/usr/bin:/bin"}, capture_output=True,
        text=True, timeout=60)
    assert "cronlog: warning: CRONLOG_WORKER_SLOT is not a setting of cronlog's (did you " \
           "mean CRONLOG_WORKER_SLOTS?)" in done.stderr, done.stderr
