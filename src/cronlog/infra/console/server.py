"""`cronlog console`: the console as its own process, a gRPC client of the api and a
read-only ClickHouse reader, served by uvicorn on CRONLOG_CONSOLE_ADDRESS."""

from __future__ import annotations

import logging

from cronlog.infra.config import ConfigError, Settings

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


def run_console(settings: Settings) -> None:
    import uvicorn

    from cronlog.infra.console.app import Console, build_app
    from cronlog.infra.console.grpc_api import GrpcJobsApi, channel_for
    from cronlog.infra.console.history import ClickHouseConsoleHistory

    check_console_bind(settings.console_address, settings.console_remote)
    host, port = host_and_port(settings.console_address)
    channel = channel_for(settings.grpc_address, settings.api_ca_file)
    console = Console(GrpcJobsApi(channel), ClickHouseConsoleHistory(settings),
                      secure_cookie=settings.console_secure_cookie)
    log.info("console on http://%s:%d/ (api %s)", host, port, settings.grpc_address)
    try:
        # uvicorn handles SIGTERM and SIGINT itself: it stops taking requests and finishes
        # the ones in progress.
        uvicorn.run(build_app(console), host=host, port=port, log_level="warning",
                    access_log=False, server_header=False, proxy_headers=False)
    finally:
        channel.close()
