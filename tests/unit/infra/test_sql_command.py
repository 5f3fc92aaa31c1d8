"""The pure parts of `cronlog sql` and of analyst provisioning: output formats, the client's
config and argv, CRONLOG_ANALYSTS and its passwords (the analysts' statements and users
file: test_analyst_copies.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from clickhouse_driver.errors import ServerException

from cronlog.infra.config import Analyst, ConfigError, Settings
from cronlog.infra.config_analysts import analysts_from_env
from cronlog.infra.entrypoints.sql import client_argv, client_config, server_message
from cronlog.infra.entrypoints.sql_output import TABLE_MAX_ROWS, WRITERS

NAMES = ["tenant", "n", "at", "tags", "note"]
ROWS: list[tuple[object, ...]] = [
    ("acme", 3, datetime(2026, 1, 2, 3, 4, 5), ["a", "b'c"], None),
    ("be\tta", 12, datetime(2026, 1, 2, 3, 4, 5), [], "line\nbreak")]


def render(fmt: str, rows: list[tuple[object, ...]] = ROWS) -> str:
    return "".join(WRITERS[fmt](NAMES, rows))


def test_tsv_escapes_tabs_line_breaks_and_nulls() -> None:
    assert render("tsv").splitlines() == [
        "tenant\tn\tat\ttags\tnote",
        # As ClickHouse writes it: the array's own escape, escaped again by TSV.
        "acme\t3\t2026-01-02 03:04:05\t['a','b\\\\'c']\t\\N",
        "be\\tta\t12\t2026-01-02 03:04:05\t[]\tline\\nbreak"]


def test_csv_and_json() -> None:
    assert render("csv").splitlines()[:2] == ["tenant,n,at,tags,note",
                                              "acme,3,2026-01-02 03:04:05,\"['a','b\\'c']\","]
    first = render("json").splitlines()[0]
    assert first == ('{"tenant": "acme", "n": 3, "at": "2026-01-02 03:04:05", '
                     '"tags": ["a", "b\'c"], "note": null}')


def test_table_aligns_numbers_right_and_hides_control_characters() -> None:
    lines = render("table").splitlines()
    assert lines[0].startswith("tenant │  n │ at")
    assert lines[2].startswith("acme   │  3 │")
    assert lines[3].startswith("be?ta  │ 12 │") and lines[3].endswith("line?break")


def test_table_stops_at_its_bound_and_says_so() -> None:
    lines = render("table", [("t", i, datetime(2026, 1, 1), [], "") for i in
                             range(TABLE_MAX_ROWS + 5)]).splitlines()
    assert len(lines) == 2 + TABLE_MAX_ROWS + 1
    assert "--format tsv" in lines[-1]


def test_server_errors_lose_their_stack_trace() -> None:
    exc = ServerException("DB::Exception: Cannot execute query in readonly mode. Stack "
                          "trace:\n\n0. clickhouse-server(StackTrace)", code=164)
    assert server_message(exc) == "Code: 164. DB::Exception: Cannot execute query in readonly mode."


def test_the_client_password_is_in_its_config_never_in_argv() -> None:
    settings = Settings(clickhouse_port=39000, clickhouse_user="cronlog",
                        clickhouse_password="s3cr<t&", clickhouse_secure=True,
                        clickhouse_ca_file="/ca.pem")
    config = client_config(settings)
    assert "<password>s3cr&lt;t&amp;</password>" in config
    assert "<caConfig>/ca.pem</caConfig>" in config
    argv = client_argv(["clickhouse-client"], settings, Path("/tmp/x/client.xml"), True)
    assert argv == ["clickhouse-client", "--config-file=/tmp/x/client.xml", "--host=127.0.0.1",
                    "--port=39000", "--database=cronlog", "--secure", "--readonly=1"]
    assert not any("s3cr" in a for a in argv)


PASSWORD = "a-password-of-20-chr"


def test_analysts_unset_are_not_managed_and_empty_means_none() -> None:
    assert analysts_from_env({}) is None
    assert analysts_from_env({"CRONLOG_ANALYSTS": ""}) == ()


def test_analysts_take_passwords_from_a_variable_or_the_file(tmp_path: Path) -> None:
    file = tmp_path / "passwords"
    file.write_text(f"# analysts\nbeta_analyst {PASSWORD}x\n")
    analysts = analysts_from_env({
        "CRONLOG_ANALYSTS": "acme:acme_analyst, beta:beta_analyst",
        "CRONLOG_ANALYST_PASSWORD_acme_analyst": PASSWORD,
        "CRONLOG_ANALYST_PASSWORDS_FILE": str(file)})
    assert analysts == (Analyst("acme", "acme_analyst", PASSWORD),
                        Analyst("beta", "beta_analyst", PASSWORD + "x"))
    assert PASSWORD not in repr(analysts) and PASSWORD not in repr(Settings(analysts=analysts))


@pytest.mark.parametrize(("env", "words"), [
    ({"CRONLOG_ANALYSTS": "acme"}, "entry 1: expected 'tenant:user'"),
    ({"CRONLOG_ANALYSTS": "ac me:x"}, "tenant 'ac me' must match"),
    ({"CRONLOG_ANALYSTS": "acme:drop-table"}, "user 'drop-table' must match"),
    ({"CRONLOG_ANALYSTS": "acme:a,beta:a"}, "user 'a' is listed twice"),
    ({"CRONLOG_ANALYSTS": "acme:a"}, "user 'a' has no password: set CRONLOG_ANALYST_PASSWORD_a"),
    ({"CRONLOG_ANALYSTS": "acme:a", "CRONLOG_ANALYST_PASSWORD_a": "short"},
     "at least 16 characters"),
    ({"CRONLOG_ANALYST_PASSWORDS_FILE": "/nowhere"}, "set without CRONLOG_ANALYSTS"),
])
def test_bad_analyst_settings_name_what_is_wrong(env: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")) as caught:
        analysts_from_env(env)
    assert "short" not in str(caught.value) or "characters" in str(caught.value)


def test_a_password_file_never_echoes_its_lines(tmp_path: Path) -> None:
    file = tmp_path / "passwords"
    file.write_text(f"a {PASSWORD} extra\nstray {PASSWORD}\n")
    env = {"CRONLOG_ANALYSTS": "acme:a", "CRONLOG_ANALYST_PASSWORDS_FILE": str(file)}
    with pytest.raises(ConfigError, match="line 1: expected 'user password', got 3 fields") as e:
        analysts_from_env(env)
    assert PASSWORD not in str(e.value)
    file.write_text(f"a {PASSWORD}\nstray {PASSWORD}\n")
    with pytest.raises(ConfigError, match="stray not listed in CRONLOG_ANALYSTS"):
        analysts_from_env(env)
    file.write_text(f"a {PASSWORD}\n")
    with pytest.raises(ConfigError, match="password of 'a' is set twice"):
        analysts_from_env({**env, "CRONLOG_ANALYST_PASSWORD_a": PASSWORD})
