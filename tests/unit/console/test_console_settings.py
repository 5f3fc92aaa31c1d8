"""The console's settings, its loopback default, and that its templates ship in the wheel."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from cronlog.infra.config import ConfigError
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.console.server import check_console_bind, host_and_port

ROOT = Path(__file__).resolve().parents[3]
CONSOLE = ROOT / "src" / "cronlog" / "infra" / "console"


def test_defaults_bind_loopback() -> None:
    settings = settings_from_env({})
    assert settings.console_address == "127.0.0.1:8080"
    assert not settings.console_remote and not settings.console_secure_cookie
    check_console_bind(settings.console_address, settings.console_remote)


def test_settings_from_the_environment() -> None:
    settings = settings_from_env({"CRONLOG_CONSOLE_ADDRESS": "0.0.0.0:9090",
                                  "CRONLOG_CONSOLE_REMOTE": "1",
                                  "CRONLOG_CONSOLE_SECURE_COOKIE": "1",
                                  "CRONLOG_TLS_CA": "/etc/ca.pem"})
    assert host_and_port(settings.console_address) == ("0.0.0.0", 9090)
    assert settings.console_remote and settings.console_secure_cookie
    assert settings.api_ca_file == "/etc/ca.pem"


def test_a_non_loopback_bind_needs_consent() -> None:
    with pytest.raises(ConfigError, match="CRONLOG_CONSOLE_REMOTE=1"):
        check_console_bind("0.0.0.0:8080", remote=False)
    check_console_bind("0.0.0.0:8080", remote=True)
    with pytest.raises(ConfigError, match="CRONLOG_CONSOLE_ADDRESS"):
        host_and_port("8080")


def test_every_template_and_static_file_is_package_data() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["cronlog.infra.console"]
    files = [p.relative_to(CONSOLE).as_posix() for p in CONSOLE.rglob("*")
             if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts]
    assert files
    assert [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)] == []
