"""The analysts' ClickHouse users: each may read its tenant's database only
(tenant_copies.py), with readonly=1 so it can change no setting, create nothing, temporary
tables included, and call no table function (remote, merge, url, file, cluster, ...).

Two ways to keep them, the same users either way:

- A users file (`cronlog-analysts-<db>.xml`) in the server's users.d-style folder
  (CRONLOG_CLICKHOUSE_USERS_DIR): `allow_databases`, a readonly profile, loopback or the
  configured networks, `password_sha256_hex`. The only way on Debian's 18.16, which has no
  SQL access control; current servers read such files too. The server reloads the folder
  by itself (18.16: within about 2 s).
- SQL on a server with access control (system.users) when no folder is configured:
  `CREATE USER ... SETTINGS readonly = 1`, `GRANT SELECT ON <tenant database>.*`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from cronlog.infra.clickhouse.tenant_copies import literal, quoted, tenant_database
from cronlog.infra.config import Analyst

USERS_FILE = "cronlog-analysts-{db}.xml"
PROFILE = "cronlog_analyst_{db}"

USERS_XML = """<?xml version="1.0"?>
<!-- Written by `cronlog provision` from CRONLOG_ANALYSTS (docs/analytics.md); it is
     rewritten whole on every provision, so edits here are lost. -->
<yandex>
    <profiles>
        <{profile}>
            <!-- 1, not 2: no setting may change, readonly included; no table functions,
                 no temporary tables. -->
            <readonly>1</readonly>
        </{profile}>
    </profiles>
    <quotas>
        <{profile}>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </{profile}>
    </quotas>
    <users>
{users}    </users>
</yandex>
"""
USER_XML = """        <{user}>
            <password_sha256_hex>{hash}</password_sha256_hex>
            <networks>
{networks}            </networks>
            <profile>{profile}</profile>
            <quota>{profile}</quota>
            <allow_databases>
                <database>{database}</database>
            </allow_databases>
        </{user}>
"""

# A server with SQL access control has system.users (18.16 has not).
ACCESS_CONTROL = ("SELECT count() FROM system.tables "
                  "WHERE database = 'system' AND name = 'users'")
SERVER_VERSION = "SELECT version()"
# The users an earlier provision made: those granted something on a tenant database.
SQL_ANALYSTS = ("SELECT DISTINCT user_name FROM system.grants "
                "WHERE startsWith(database, %(prefix)s) AND user_name != ''")
SQL_USERS = "SELECT name FROM system.users"
CREATE_USER = ("CREATE USER IF NOT EXISTS {user} IDENTIFIED WITH sha256_hash BY '{hash}' "
               "HOST IP {hosts} SETTINGS readonly = 1 READONLY")
# The same for a user that exists: its password, hosts and setting as configured now.
ALTER_USER = ("ALTER USER {user} IDENTIFIED WITH sha256_hash BY '{hash}' "
              "HOST IP {hosts} SETTINGS readonly = 1 READONLY")
REVOKE_ALL = "REVOKE ALL ON *.* FROM {user}"
GRANT_SELECT = "GRANT SELECT ON {tdb}.* TO {user}"
DROP_USER = "DROP USER IF EXISTS {user}"


def password_hash(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


def render_users_xml(database: str, analysts: Sequence[Analyst],
                     networks: Sequence[str]) -> str:
    """The users file. User, profile and database names are checked identifiers already;
    escaped all the same, as are the networks."""
    profile = PROFILE.format(db=database)
    hosts = "".join(f"                <ip>{escape(n)}</ip>\n" for n in networks)
    users = "".join(USER_XML.format(
        user=a.user, hash=password_hash(a.password), networks=hosts, profile=profile,
        database=escape(tenant_database(database, a.tenant))) for a in analysts)
    return USERS_XML.format(profile=profile, users=users)


def users_in_file(path: Path) -> list[str]:
    """The users an earlier provision wrote to `path` ([] when there is none)."""
    try:
        root = ElementTree.fromstring(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ElementTree.ParseError):
        return []
    users = root.find("users")
    return [] if users is None else [child.tag for child in users]


def write_users_file(folder: Path, database: str, analysts: Sequence[Analyst],
                     networks: Sequence[str]) -> tuple[Path, list[str]]:
    """Writes the users file whole (a temporary file renamed over it, so the server never
    reads half of one), or removes it when no analyst is left. Returns its path and the
    users it held before."""
    path = folder / USERS_FILE.format(db=database)
    before = users_in_file(path)
    if not analysts:
        path.unlink(missing_ok=True)
        return path, before
    # Readable by the server's user (often another account than provision's): the file
    # holds SHA-256 hashes of long random passwords, not the passwords.
    fd, temporary = tempfile.mkstemp(prefix=".cronlog-analysts-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(render_users_xml(database, analysts, networks))
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path, before


def sql_statements(database: str, analysts: Sequence[Analyst], networks: Sequence[str],
                   existing: Sequence[str]) -> list[str]:
    """The statements that make a server's SQL-managed analysts exactly `analysts`;
    `existing`: the users an earlier provision made."""
    hosts = ", ".join(literal(n) for n in networks)
    listed = {a.user for a in analysts}
    statements = [DROP_USER.format(user=quoted(u)) for u in sorted(set(existing) - listed)]
    for analyst in analysts:
        user, hashed = quoted(analyst.user), password_hash(analyst.password)
        statements += [CREATE_USER.format(user=user, hash=hashed, hosts=hosts),
                       ALTER_USER.format(user=user, hash=hashed, hosts=hosts),
                       REVOKE_ALL.format(user=user),
                       GRANT_SELECT.format(tdb=quoted(tenant_database(database, analyst.tenant)),
                                           user=user)]
    return statements


def redacted(statement: str) -> str:
    """A statement as an error may show it: without the password's hash."""
    head, sep, tail = statement.partition(" BY '")
    return head + (sep + "…'" + tail.partition("'")[2] if sep else "")
