"""docs/configuration.md is what `make docs` renders from the settings' definitions: a
setting added, renamed or redescribed without `make docs` fails here."""

from __future__ import annotations

from pathlib import Path

from cronlog_dev.docs import LAUNCHER, render_configuration, write_configuration
from cronlog_dev.run_settings import LAUNCHER_VARIABLES

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_page_is_what_the_generator_renders() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == render_configuration(), "run `make docs` and commit the page"


def test_every_setting_of_the_launcher_is_on_the_page() -> None:
    assert {s.name for s in LAUNCHER} >= LAUNCHER_VARIABLES


def test_check_says_whether_the_page_is_current(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    assert write_configuration(page, check=True) == 1
    assert write_configuration(page) == 0
    assert write_configuration(page, check=True) == 0
    page.write_text(page.read_text() + "edited by hand\n")
    assert write_configuration(page, check=True) == 1
