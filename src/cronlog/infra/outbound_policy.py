"""The outbound policy from Settings, for the worker's `http` handler and the notifier's
webhook and Slack senders: the operator's allow-list, and the deployment's own servers
(Kafka, Postgres, ClickHouse, the SMTP server of alert e-mails) that a URL a tenant named
must not reach."""

from __future__ import annotations

import logging
import socket

from cronlog.infra.config import Settings
from cronlog.outbound.policy import OutboundPolicy

log = logging.getLogger(__name__)


def _host_port(text: str, default_port: int) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    return host, int(port) if port.isdigit() else default_port


def own_servers(settings: Settings) -> list[tuple[str, int]]:
    """Every (host, port) the deployment's processes talk to, as Settings names them."""
    servers = [_host_port(b, 9092) for b in settings.kafka_bootstrap.split(",") if b.strip()]
    servers.append((settings.clickhouse_host, settings.clickhouse_port))
    if settings.smtp_host:
        servers.append((settings.smtp_host, settings.smtp_port))
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(settings.postgres_dsn)
    except Exception as exc:  # the DSN is the Postgres adapter's to judge, not this fence's
        log.warning("cannot read the Postgres DSN's hosts for the outbound fence: %s", exc)
        params = {}
    hosts = str(params.get("host") or params.get("hostaddr") or "localhost").split(",")
    ports = str(params.get("port") or "5432").split(",")
    for i, host in enumerate(hosts):
        port = ports[i] if i < len(ports) else ports[-1]
        if host and not host.startswith("/"):  # a Unix socket folder is no network address
            servers.append((host, int(port) if port.isdigit() else 5432))
    return servers


def _with_addresses(servers: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The servers and the addresses their names resolve to now: a URL may name one by
    address, or by another name of the same address."""
    resolved = list(servers)
    for host, port in servers:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            log.warning("outbound fence: cannot resolve own server %s: %s", host, exc)
            continue
        resolved += [(str(info[4][0]).split("%", 1)[0], port) for info in infos]
    return resolved


def outbound_policy(settings: Settings) -> OutboundPolicy:
    return OutboundPolicy.of(settings.http_allow, _with_addresses(own_servers(settings)))
