"""Every CRONLOG_* name the parser reads has an entry in the settings' catalogue, with what
it means, and each entry's default is the parser's: docs/configuration.md, rendered from the
catalogue, cannot name a setting cronlog does not read nor miss one it does."""

from __future__ import annotations

import dataclasses
import ipaddress

import pytest

from cronlog.infra.config_env import settings_from_env
from cronlog.infra.setting_catalogue import SETTINGS, SettingDoc
from cronlog.infra.setting_names import OTHER_NAMES, OTHER_PREFIXES, known_names

# An environment that turns on what some names are read only with.
_SWITCHED_ON = {"CRONLOG_ANALYSTS": "acme:acme_analyst", "CRONLOG_CLICKHOUSE_SECURE": "1",
                "CRONLOG_KAFKA_PARTITIONS": "4"}
_FIXED = {"CRONLOG_INSTANCE_ID": "scheduler-test"}  # its default is random


def test_every_name_the_parser_reads_has_an_entry() -> None:
    documented = {s.name for s in SETTINGS}
    read = {n for n in known_names({}) | known_names(_SWITCHED_ON)
            if not n.startswith(OTHER_PREFIXES)}
    assert "CRONLOG_ANALYST_PASSWORDS_FILE" in read
    assert read - documented == set(), "add these to setting_catalogue.py"


def test_every_entry_is_read_by_cronlog() -> None:
    read = known_names({}) | known_names(_SWITCHED_ON)
    fixed = {s.name for s in SETTINGS if s.family_prefix is None}
    assert fixed - read == set(), "the catalogue names settings nothing reads"
    assert fixed >= OTHER_NAMES


def test_each_entry_says_what_it_means_once() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for setting in SETTINGS:
        assert setting.name.startswith("CRONLOG_")
        assert len(setting.meaning.strip()) >= 10, f"{setting.name}: say what it means"
        assert not (setting.default and setting.default_words), setting.name


@pytest.mark.parametrize("setting", [s for s in SETTINGS
                                     if s.default and s.read_by == "settings"],
                         ids=lambda s: s.name)
def test_the_documented_default_is_the_parsers(setting: SettingDoc) -> None:
    unset = settings_from_env(dict(_FIXED))
    written = settings_from_env({**_FIXED, setting.name: setting.default})
    # A network as written is kept in its CIDR form: the same networks.
    written = dataclasses.replace(written, analyst_networks=tuple(
        str(ipaddress.ip_address(n.removesuffix("/32").removesuffix("/128")))
        for n in written.analyst_networks))
    assert written == unset
