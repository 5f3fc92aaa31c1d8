"""`cronlog console`: the console as its own process, a gRPC client of the api and a
read-only ClickHouse reader, served by uvicorn on CRONLOG_CONSOLE_ADDRESS."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cronlog.infra.config import ConfigError, Settings

if TYPE_CHECKING:
    from cronlog.console.ports import JobsApi, RunHistory
    from cronlog.infra.console.app import Console

log = logging.getLogger(__name__)


class ConsoleBindRefused(ConfigError):
    """The console was asked to listen beyond this machine without saying so."""


def host_and_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ConfigError(f"CRONLOG_CONSOLE_ADDRESS: expected host:port, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def check_console_bind(address: str, remote: bool) -> None:
    """Signed-in sessions carry tenant tokens over plain HTTP: beyond loopback only when the
    operator says so (and puts TLS in front, with CRONLOG_CONSOLE_SECURE_COOKIE=1)."""
    from cronlog.infra.grpc.auth import is_loopback_bind

    if remote or is_loopback_bind(address):
        return
    raise ConsoleBindRefused(
        f"CRONLOG_CONSOLE_ADDRESS {address} is not a loopback address: the console carries "
        "tenant tokens and sessions over plain HTTP. Bind 127.0.0.1, or set "
        "CRONLOG_CONSOLE_REMOTE=1 behind a TLS proxy (and CRONLOG_CONSOLE_SECURE_COOKIE=1).")


def check_console_hosts(address: str, hosts: tuple[str, ...]) -> None:
    """A console listening beyond loopback that answers only loopback names would refuse
    every browser: the names it is reached by must be listed."""
    from cronlog.infra.console.hosts import is_loopback_only
    from cronlog.infra.grpc.auth import is_loopback_bind

    if not is_loopback_bind(address) and is_loopback_only(hosts):
        raise ConfigError(
            f"CRONLOG_CONSOLE_HOSTS: the console listens on {address}, beyond loopback, but "
            f"answers only to {', '.join(hosts)}; list the names browsers reach it by "
            "(CRONLOG_CONSOLE_HOSTS=console.example.com), which refuses any other Host "
            "(DNS rebinding).")


def secure_cookie(settings: Settings) -> bool:
    """Secure whenever the console is remote (its cookies then only ever travel over the
    TLS proxy in front of it), and when CRONLOG_CONSOLE_SECURE_COOKIE=1 says so."""
    from cronlog.infra.grpc.auth import is_loopback_bind

    return settings.console_secure_cookie or not is_loopback_bind(settings.console_address)


def console_for(settings: Settings, api: JobsApi, history: RunHistory) -> Console:
    """The console as `cronlog console` configures it."""
    from cronlog.console.sessions import MAX_SESSIONS, SessionStore
    from cronlog.infra.console.app import Console

    return Console(api, history, secure_cookie=secure_cookie(settings),
                   sessions=SessionStore(max_sessions=MAX_SESSIONS,
                                         per_tenant=min(MAX_SESSIONS,
                                                        settings.console_tenant_sessions)),
                   allowed_hosts=settings.console_hosts,
                   page_seconds=settings.console_page_seconds,
                   tenant_share=settings.console_tenant_share)


def run_console(settings: Settings) -> None:
    import uvicorn

    from cronlog.client import connect
    from cronlog.infra.console.app import build_app
    from cronlog.infra.console.grpc_api import GrpcJobsApi
    from cronlog.infra.console.history import ClickHouseConsoleHistory

    check_console_bind(settings.console_address, settings.console_remote)
    check_console_hosts(settings.console_address, settings.console_hosts)
    host, port = host_and_port(settings.console_address)
    client = connect(settings.grpc_address, ca_file=settings.api_ca_file)
    console = console_for(settings, GrpcJobsApi(client), ClickHouseConsoleHistory(settings))
    log.info("console on http://%s:%d/ (api %s)", host, port, settings.grpc_address)
    try:
        # uvicorn handles SIGTERM and SIGINT itself: it stops taking requests and finishes
        # the ones in progress.
        uvicorn.run(build_app(console), host=host, port=port, log_level="warning",
                    access_log=False, server_header=False, proxy_headers=False)
    finally:
        client.close()
