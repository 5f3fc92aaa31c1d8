"""Runs the `cronlog` command in-process, configured as an operator would: by the variables
the settings give back (CRONLOG_*), set for the one test."""

from __future__ import annotations

import pytest

from cronlog.infra.config import Settings
from cronlog.infra.entrypoints.cli import main
from cronlog_dev.processes import settings_env


def set_settings_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in settings_env(settings).items():
        monkeypatch.setenv(name, value)
    return settings


def cronlog(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The exit code, standard output and standard error of `cronlog *argv`."""
    code = main(list(argv))
    out = capfd.readouterr()
    return code, out.out, out.err
