"""Which CRONLOG_* settings `make run` takes from the user, which it keeps for itself, and
what it writes down for operator commands. Pure: the launcher (run.py) does the starting.

The user's settings win over the stack's defaults, so `CRONLOG_PARTITIONS=1024 make run`
provisions and runs 1,024 partitions. The stack's own addresses and passwords cannot be
set: the servers it starts are where they are, and a role pointed elsewhere would leave
the banner, the env file and the readiness check describing a service that is not there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.setting_names import unknown_names
from cronlog_dev.example_handlers import example_defaults
from cronlog_dev.processes import settings_env

PREFIX = "CRONLOG_"
ENV_FILE_VARIABLE = "CRONLOG_ENV_FILE"
PORT_OFFSET_VARIABLE = "CRONLOG_RUN_PORT_OFFSET"

# Read by the launcher itself, not by the roles it starts.
LAUNCHER_VARIABLES = frozenset({"CRONLOG_KAFKA_BROKERS", "CRONLOG_STATE_DIR",
                                PORT_OFFSET_VARIABLE})

_SERVERS = "the local {} `make run` starts"
_API = "the api `make run` starts serves plaintext gRPC on loopback, which its readiness " \
       "check and the banner's commands use"
_PLANNED = "a fixed loopback port of `make run`'s (docs/development.md, Ports)"

# Each with why it is the stack's: said in the refusal.
STACK_OWNED: Mapping[str, str] = {
    "CRONLOG_KAFKA_BOOTSTRAP": _SERVERS.format("Kafka") + " (CRONLOG_KAFKA_BROKERS sets "
                                                          "how many nodes)",
    "CRONLOG_POSTGRES_DSN": _SERVERS.format("PostgreSQL, with its own password"),
    "CRONLOG_CLICKHOUSE_HOST": _SERVERS.format("ClickHouse"),
    "CRONLOG_CLICKHOUSE_PORT": _SERVERS.format("ClickHouse"),
    "CRONLOG_CLICKHOUSE_USER": _SERVERS.format("ClickHouse's only user"),
    "CRONLOG_CLICKHOUSE_PASSWORD": _SERVERS.format("ClickHouse's own password"),
    "CRONLOG_CLICKHOUSE_SECURE": _SERVERS.format("ClickHouse, plaintext on loopback"),
    "CRONLOG_CLICKHOUSE_VERIFY": _SERVERS.format("ClickHouse, plaintext on loopback"),
    "CRONLOG_CLICKHOUSE_CA_FILE": _SERVERS.format("ClickHouse, plaintext on loopback"),
    "CRONLOG_CLICKHOUSE_USERS_DIR": _SERVERS.format("ClickHouse's users.d folder"),
    "CRONLOG_GRPC_ADDRESS": _API,
    "CRONLOG_TLS_CERT": _API,
    "CRONLOG_TLS_KEY": _API,
    "CRONLOG_METRICS_HOST": _PLANNED,
    "CRONLOG_API_METRICS_PORT": _PLANNED,
    "CRONLOG_SCHEDULER_METRICS_PORT": _PLANNED,
    "CRONLOG_WORKER_METRICS_PORT": _PLANNED,
    "CRONLOG_PROJECTOR_METRICS_PORT": _PLANNED,
    "CRONLOG_CONSOLE_ADDRESS": _PLANNED,
}

# What an operator command needs to reach the stack, beyond the user's own settings.
ENV_FILE_SETTINGS = (
    "CRONLOG_KAFKA_BOOTSTRAP", "CRONLOG_POSTGRES_DSN", "CRONLOG_CLICKHOUSE_HOST",
    "CRONLOG_CLICKHOUSE_PORT", "CRONLOG_CLICKHOUSE_DATABASE", "CRONLOG_CLICKHOUSE_USER",
    "CRONLOG_CLICKHOUSE_PASSWORD", "CRONLOG_CLICKHOUSE_USERS_DIR", "CRONLOG_GRPC_ADDRESS",
    "CRONLOG_TOPIC_PREFIX",
    "CRONLOG_PARTITIONS", "CRONLOG_TOPIC_REPLICATION_FACTOR",
    "CRONLOG_TOPIC_MIN_INSYNC_REPLICAS",
)

_SECRET_PARTS = ("PASSWORD", "TOKEN", "DSN", "KAFKA_CONFIG", "SECRET", "KEY")


class RunSettingsError(Exception):
    """`make run` cannot start with the settings it was given; the message never holds a
    value that may be a password."""


class StackOwnedSetting(RunSettingsError):
    """The user set a variable whose value the local stack decides."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        reasons = "; ".join(f"{name} ({STACK_OWNED[name]})" for name in names)
        super().__init__(
            f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} `make run`'s own and "
            f"cannot be set: {reasons}. Unset {'it' if len(names) == 1 else 'them'}; to use "
            "other servers, start the roles yourself (docs/configuration.md, \"Pointing "
            "cronlog at existing servers\")")


class InvalidRunSetting(RunSettingsError):
    """A variable holds a value the service's own parser refuses, or one the stack cannot
    serve; the message is the parser's."""


@dataclass(frozen=True)
class RunSettings:
    """What the roles run with: `env` is every CRONLOG_* variable they get (the user's,
    the stack's defaults, the stack's own), `settings` the service's reading of it, and
    `given` the user's own variables as they set them."""

    env: dict[str, str]
    settings: Settings
    given: dict[str, str]
    baseline: Settings

    def non_default(self) -> dict[str, str]:
        """The user's variables that change something, as the banner shows them: a value
        spelling the default (CRONLOG_PARTITIONS=8) is left out, secrets are not shown."""
        mine, usual = settings_env(self.settings), settings_env(self.baseline)
        shown: dict[str, str] = {}
        unknown = unknown_names(self.given)
        for name, value in sorted(self.given.items()):
            if name in unknown or (name in mine and mine[name] == usual.get(name)):
                continue
            shown[name] = shown_value(name, value)
        return shown

    def env_file_lines(self) -> list[str]:
        """KEY=VALUE lines for operator commands (cronlog --env-file): how to reach the
        stack, then the user's settings. A value spanning lines cannot be one of them."""
        mine = settings_env(self.settings)
        chosen = {name: mine[name] for name in ENV_FILE_SETTINGS}
        for name, value in self.given.items():
            chosen.setdefault(name, value)
        lines = []
        for name, value in chosen.items():
            if "\n" in value or "\r" in value:
                lines.append(f"# {name} is not here: its value spans lines; set it in the "
                             "environment")
                continue
            lines.append(f"{name}={value}")
        return lines


def shown_value(name: str, value: str) -> str:
    if any(part in name.removeprefix(PREFIX) for part in _SECRET_PARTS):
        return "(set; not shown)"
    if "\n" in value:
        return f"({len(value.splitlines())} lines)"
    return value


def user_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The CRONLOG_* variables the user set for the roles: empty ones count as unset, the
    launcher's own are not the roles', and an env file a shell exported for operator
    commands (usually the previous run's) must not fill in the roles' settings."""
    return {name: value for name, value in environ.items()
            if name.startswith(PREFIX) and value != ""
            and name not in LAUNCHER_VARIABLES and name != ENV_FILE_VARIABLE}


def stack_owned_env(stack: Settings) -> dict[str, str]:
    """The values this stack gives the STACK_OWNED variables that every role gets (the run
    plan's per-role ones aside)."""
    env = {**settings_env(stack), "CRONLOG_TLS_CERT": "", "CRONLOG_TLS_KEY": ""}
    return {name: env[name] for name in STACK_OWNED if name in env}


def merge(environ: Mapping[str, str], stack: Settings, planned: Mapping[str, str],
          brokers: int) -> RunSettings:
    """The roles' settings: the stack's defaults, then the user's, then the stack's own.

    planned: the run plan's variables (metrics ports, console address); they reach only
    their role, but a user setting one is refused like the others. A stack-owned variable
    set to the value the stack gives anyway (a shell that loaded the last run's env file)
    is no conflict. Raises StackOwnedSetting or InvalidRunSetting before anything starts."""
    given = user_settings(environ)
    connection = stack_owned_env(stack)
    owned = {**connection, **planned}
    refused = [name for name in STACK_OWNED if name in given and given[name] != owned.get(name)]
    if refused:
        raise StackOwnedSetting(refused)
    given = {name: value for name, value in given.items() if name not in STACK_OWNED}
    usual = settings_env(Settings())
    # What the stack sets unlike a bare service: the topics' replication on a cluster.
    defaults = {name: value for name, value in settings_env(stack).items()
                if name not in STACK_OWNED and value != usual.get(name)}
    defaults.update(example_defaults())
    env = {**defaults, **given, **connection}
    try:
        settings = settings_from_env(env)
        baseline = settings_from_env({**defaults, **connection})
    except ConfigError as exc:
        raise InvalidRunSetting(str(exc)) from None
    if settings.topic_replication_factor > brokers:
        raise InvalidRunSetting(
            f"CRONLOG_TOPIC_REPLICATION_FACTOR: {settings.topic_replication_factor} replicas "
            f"need as many Kafka brokers; `make run` starts {brokers} (CRONLOG_KAFKA_BROKERS)")
    return RunSettings(env, settings, given, baseline)
