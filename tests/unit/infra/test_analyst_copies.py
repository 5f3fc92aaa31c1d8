"""The pure parts of per-tenant analyst access: the tenant copies' statements, which copies
are stale, the users file (escaped, whole), the SQL users' statements, the names and the
networks refused with what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast
from xml.etree import ElementTree

import pytest

from cronlog.infra.clickhouse.analyst_access import AnalystAccessError, check
from cronlog.infra.clickhouse.analyst_users import (
    password_hash,
    redacted,
    render_users_xml,
    sql_statements,
    users_in_file,
    write_users_file,
)
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.clickhouse.tenant_copies import (
    Column,
    Copies,
    TenantCopyError,
    digest,
    drop_statements,
    quoted,
    rebuild_statements,
    stale,
    tenant_database,
    tenant_of,
)
from cronlog.infra.config import Analyst, ConfigError, Settings
from cronlog.infra.config_analysts import analyst_networks_from_env

PASSWORD = "p" * 20
RUNS = (Column("tenant", "String", "", ""), Column("run_id", "String", "", ""),
        Column("logical_time", "DateTime", "DEFAULT", "scheduled_at"),
        Column("day", "Date", "MATERIALIZED", "toDate(scheduled_at)"))
REJECTED = (Column("body", "String", "", ""),)


def copies(**overrides: Any) -> Copies:
    fields: dict[str, Any] = {
        "database": "cronlog", "tables": {"runs": RUNS, "rejected_events": REJECTED},
        "tenant_databases": frozenset({"cronlog_tenant_acme", "cronlog_tenant_gone"}),
        "feeds": frozenset({("cronlog_tenant_acme", "runs_feed"),
                            ("cronlog_tenant_gone", "runs_feed")}),
        "completed": {("acme", "runs"): digest(RUNS)}}
    return Copies(**{**fields, **overrides})


def test_a_copy_is_made_feed_after_table_and_copied_once_after_the_feed() -> None:
    plan = rebuild_statements("cronlog", "a.b-c", "runs", RUNS)
    tdb = "`cronlog_tenant_a.b-c`"
    columns = "`tenant`, `run_id`, `logical_time`"  # the MATERIALIZED one is computed
    assert plan == [
        f"CREATE DATABASE IF NOT EXISTS {tdb}",
        f"DROP TABLE IF EXISTS {tdb}.`runs_feed`",
        f"DROP TABLE IF EXISTS {tdb}.`runs`",
        f"CREATE TABLE {tdb}.`runs` AS `cronlog`.`runs`",
        f"CREATE MATERIALIZED VIEW {tdb}.`runs_feed` TO {tdb}.`runs` AS SELECT {columns} "
        "FROM `cronlog`.`runs` WHERE tenant = 'a.b-c'",
        f"INSERT INTO {tdb}.`runs` ({columns}) SELECT {columns} FROM `cronlog`.`runs` "
        "WHERE tenant = 'a.b-c'",
    ]


def test_only_tables_with_a_tenant_column_are_copied_and_stale_ones_are_rebuilt() -> None:
    assert copies().copied_tables() == ["runs"]
    assert copies().never_copied() == ["rejected_events"]
    assert stale(copies(), "acme") == []
    assert stale(copies(), "beta") == ["runs"]  # never made
    # A column added to the history: the copy was completed with the old ones.
    added = {"runs": (*RUNS, Column("depth", "UInt32", "", "")), "rejected_events": REJECTED}
    assert stale(copies(tables=added), "acme") == ["runs"]
    # A provision interrupted after the feed, before its copy was marked complete.
    assert stale(copies(completed={}), "acme") == ["runs"]
    assert stale(copies(feeds=frozenset()), "acme") == ["runs"]


def test_a_tenant_is_dropped_feeds_first() -> None:
    assert drop_statements(copies(), "cronlog_tenant_gone") == [
        "DROP TABLE IF EXISTS `cronlog_tenant_gone`.`runs_feed`",
        "DROP DATABASE IF EXISTS `cronlog_tenant_gone`"]


def test_tenant_databases_are_named_quoted_and_checked() -> None:
    assert tenant_database("cronlog", "acme") == "cronlog_tenant_acme"
    assert tenant_of("cronlog", "cronlog_tenant_a.b-c") == "a.b-c"
    assert tenant_of("cronlog", "cronlog_rebuild_1234") is None
    assert tenant_of("cronlog", "other_tenant_acme") is None
    assert quoted("a`b\\c") == "`a\\`b\\\\c`"
    for bad in ("", "a b", "x'; DROP DATABASE cronlog; --", "a`b", "t" * 65):
        with pytest.raises(TenantCopyError, match="must match"):
            tenant_database("cronlog", bad)


def test_the_users_file_lets_each_analyst_read_its_tenant_database_only() -> None:
    text = render_users_xml("cronlog", [Analyst("acme", "acme_analyst", PASSWORD),
                                        Analyst("a.b-c", "abc_analyst", PASSWORD + "x")],
                            ["127.0.0.1", "10.0.0.0/8"])
    root = ElementTree.fromstring(text)
    assert root.tag == "yandex"
    assert root.findtext("profiles/cronlog_analyst_cronlog/readonly") == "1"
    acme = root.find("users/acme_analyst")
    assert acme is not None
    assert acme.findtext("password_sha256_hex") == password_hash(PASSWORD)
    assert [e.text for e in acme.findall("networks/ip")] == ["127.0.0.1", "10.0.0.0/8"]
    assert acme.findtext("profile") == "cronlog_analyst_cronlog"
    assert acme.findtext("quota") == "cronlog_analyst_cronlog"
    assert [e.text for e in acme.findall("allow_databases/database")] == ["cronlog_tenant_acme"]
    assert root.findtext("users/abc_analyst/allow_databases/database") == "cronlog_tenant_a.b-c"
    assert PASSWORD not in text


def test_the_users_file_is_written_whole_and_removed_with_the_last_analyst(
        tmp_path: Path) -> None:
    analysts = [Analyst("acme", "acme_analyst", PASSWORD), Analyst("beta", "beta_analyst",
                                                                   PASSWORD)]
    path, before = write_users_file(tmp_path, "cronlog", analysts, ["::1"])
    assert (path.name, before) == ("cronlog-analysts-cronlog.xml", [])
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    _, before = write_users_file(tmp_path, "cronlog", analysts[:1], ["::1"])
    assert before == ["acme_analyst", "beta_analyst"]
    assert users_in_file(path) == ["acme_analyst"]
    _, before = write_users_file(tmp_path, "cronlog", [], ["::1"])
    assert before == ["acme_analyst"] and not path.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left


def test_sql_users_are_granted_their_tenant_database_only() -> None:
    plan = sql_statements("cronlog", [Analyst("a.b-c", "abc_analyst", PASSWORD)],
                          ["127.0.0.1", "::1"], ["gone_analyst", "abc_analyst"])
    assert plan[0] == "DROP USER IF EXISTS `gone_analyst`"
    assert plan[1].startswith("CREATE USER IF NOT EXISTS `abc_analyst` IDENTIFIED WITH "
                              "sha256_hash BY '")
    assert plan[1].endswith("HOST IP '127.0.0.1', '::1' SETTINGS readonly = 1 READONLY")
    assert plan[3:] == ["REVOKE ALL ON *.* FROM `abc_analyst`",
                        "GRANT SELECT ON `cronlog_tenant_a.b-c`.* TO `abc_analyst`"]
    assert not any(PASSWORD in s for s in plan)
    assert "sha256_hash BY '…' HOST" in redacted(plan[1])
    assert password_hash(PASSWORD) not in redacted(plan[1])


@pytest.mark.parametrize("user, words", [("cronlog", "cronlog's own ClickHouse user"),
                                         ("default", "the server's own")])
def test_the_service_user_and_default_cannot_be_analysts(user: str, words: str) -> None:
    history = cast(ClickHouseRunHistory, type("H", (), {"database": "cronlog"})())
    with pytest.raises(AnalystAccessError, match=words):
        check(Settings(clickhouse_user="cronlog"), history, [Analyst("acme", user, PASSWORD)])


def test_a_users_folder_that_is_not_one_is_refused(tmp_path: Path) -> None:
    history = cast(ClickHouseRunHistory, type("H", (), {"database": "cronlog"})())
    settings = Settings(clickhouse_user="cronlog", clickhouse_users_dir=str(tmp_path / "no"))
    with pytest.raises(AnalystAccessError, match=r"CRONLOG_CLICKHOUSE_USERS_DIR .* not a folder"):
        check(settings, history, [Analyst("acme", "acme_analyst", PASSWORD)])


def test_analyst_networks() -> None:
    default = ("127.0.0.1", "::1")
    assert analyst_networks_from_env({}, default) == default
    assert analyst_networks_from_env({"CRONLOG_ANALYST_NETWORKS": "10.1.2.3/8, ::1"},
                                     default) == ("10.0.0.0/8", "::1/128")
    with pytest.raises(ConfigError, match="CRONLOG_ANALYST_NETWORKS entry 2: 'x<y>'"):
        analyst_networks_from_env({"CRONLOG_ANALYST_NETWORKS": "::1,x<y>"}, default)
