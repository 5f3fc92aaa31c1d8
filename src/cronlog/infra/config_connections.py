"""How cronlog reaches secured servers, from the environment: CRONLOG_KAFKA_CONFIG(_FILE), the
librdkafka settings added to every Kafka client (security, timeouts, tuning), and ClickHouse's
TLS. Each checked at start, errors naming the variable and never a secret."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from cronlog.infra.config import ConfigError

INLINE_VARIABLE = "CRONLOG_KAFKA_CONFIG"
FILE_VARIABLE = "CRONLOG_KAFKA_CONFIG_FILE"

# What cronlog's correctness rests on, so no operator setting may change it; each with why.
OWNED_KEYS: Mapping[str, str] = {
    "bootstrap.servers": f"set it with CRONLOG_KAFKA_BOOTSTRAP, not {INLINE_VARIABLE}",
    "metadata.broker.list": "an alias of bootstrap.servers: set CRONLOG_KAFKA_BOOTSTRAP",
    "transactional.id": "it is each scheduler's own fencing identity (CRONLOG_INSTANCE_ID); "
                        "one id shared by every process would fence all but one",
    "enable.idempotence": "producer retries must never duplicate or reorder a command, a "
                          "report or an event",
    "acks": "a write counts once every in-sync replica has it (and idempotence needs all)",
    "request.required.acks": "an alias of acks, which cronlog keeps at all",
    "isolation.level": "readers see only committed owner transactions, never a fenced "
                       "owner's aborted writes (read_committed)",
    "enable.auto.commit": "offsets are committed in the owner's transaction or after what "
                          "they stand for is written, never on a timer",
    "enable.auto.offset.store": "offsets are stored only past what was handled",
    "auto.offset.reset": "a new consumer group starts at the beginning of the log; "
                         "'latest' would skip commands and events",
    "group.id": "cronlog names its groups from CRONLOG_TOPIC_PREFIX; ownership of partitions "
                "follows them",
    "group.instance.id": "one static member id shared by every process would fence all but "
                         "one of them",
    "partition.assignment.strategy": "owners and workers take and hand over partitions "
                                     "incrementally (cooperative-sticky)",
    "transaction.timeout.ms": "an owner's transaction is aborted after 60 s; a departed "
                              "owner's open one is ended by the owner taking its partitions",
    "session.timeout.ms": "the schedulers' follows CRONLOG_OWNER_SESSION_TIMEOUT_MS; the "
                          "workers' is 10 s",
    "heartbeat.interval.ms": "it follows the session timeout (CRONLOG_OWNER_SESSION_TIMEOUT_MS)",
    "enable.partition.eof": "replay and catch-up rely on knowing where a partition ends",
    "partitioner": "every job-keyed topic must put a key on the same partition as Kafka's Java "
                   "clients (murmur2_random), so partition p of each belongs to one owner",
}

_KEY = re.compile(r"[a-z][a-z0-9._]*")
# Values of these keys are never repeated in an error message (librdkafka's included).
_SECRET_PARTS = ("password", "secret", "key", "jaas", "token", "sasl.oauthbearer.config")


def is_secret(key: str) -> bool:
    return any(part in key for part in _SECRET_PARTS)


def parse_kafka_config(text: str, source: str) -> list[tuple[str, str]]:
    """`key=value` lines; blank lines and lines starting with '#' are skipped. The value is
    everything after the first '=' with surrounding blanks removed, commas included (a
    password may hold any of them), so settings are one a line, never comma-separated."""
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{source} line {number}"
        key, sep, value = stripped.partition("=")
        key, value = key.strip(), value.strip()
        # Never the line itself in an error: it may be a password's line.
        if not sep:
            raise ConfigError(f"{where}: expected 'key=value'")
        if not _KEY.fullmatch(key):
            raise ConfigError(f"{where}: {key!r} is not a librdkafka property name")
        if key in OWNED_KEYS:
            raise ConfigError(f"{where}: {key} is cronlog's own: {OWNED_KEYS[key]}")
        if not value:
            raise ConfigError(f"{where}: {key} has no value")
        pairs.append((key, value))
    return pairs


def read_named_file(env: Mapping[str, str], variable: str) -> tuple[str, str] | None:
    """The text of the file the variable names and how errors name it ("VARIABLE path"), or
    None when the variable is unset or empty."""
    path = env.get(variable, "")
    if not path:
        return None
    source = f"{variable} {path}"
    try:
        return Path(path).read_text(encoding="utf-8"), source
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read: {exc}") from exc


def kafka_config_from_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The file's settings, then the variable's; a key set twice is an error rather than a
    silent override. Every setting is tried on a client of librdkafka's before it counts."""
    pairs: list[tuple[str, str]] = []
    named = read_named_file(env, FILE_VARIABLE)
    if named is not None:
        pairs += parse_kafka_config(*named)
    pairs += parse_kafka_config(env.get(INLINE_VARIABLE, ""), INLINE_VARIABLE)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ConfigError(f"{INLINE_VARIABLE}: {key} is set twice "
                              f"(in {INLINE_VARIABLE} and {FILE_VARIABLE} together)")
        seen.add(key)
    check_with_librdkafka(pairs)
    return tuple(pairs)


def check_with_librdkafka(pairs: list[tuple[str, str]]) -> None:
    """Builds a producer from the settings without any broker to reach: librdkafka checks
    every name and value and loads the TLS files, so a misspelt property or a missing CA
    file stops the process at start instead of failing its first connection later."""
    if not pairs:
        return
    from confluent_kafka import KafkaException, Producer

    try:
        # Log level 0: librdkafka would warn about the missing bootstrap.servers.
        Producer({**dict(pairs), "log_level": 0})
    except (KafkaException, TypeError, ValueError) as exc:
        message = str(exc.args[0].str() if isinstance(exc, KafkaException) else exc)
        for key, value in pairs:
            if is_secret(key):
                message = message.replace(value, "***")
        raise ConfigError(f"{INLINE_VARIABLE}: librdkafka refuses the settings: "
                          f"{message}") from None


class ClickHouseTls(TypedDict):
    clickhouse_secure: bool
    clickhouse_verify: bool
    clickhouse_ca_file: str


def _on_off(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ConfigError(f"{name}: expected 1 or 0, got {raw!r}")


def clickhouse_tls_from_env(env: Mapping[str, str]) -> ClickHouseTls:
    """CRONLOG_CLICKHOUSE_SECURE, _VERIFY (default on) and _CA_FILE. A CA file or verify=0
    without SECURE=1 is an error: the operator meant TLS, and plaintext must not follow."""
    secure = _on_off(env, "CRONLOG_CLICKHOUSE_SECURE", False)
    verify = _on_off(env, "CRONLOG_CLICKHOUSE_VERIFY", True)
    ca_file = env.get("CRONLOG_CLICKHOUSE_CA_FILE", "")
    if not secure and (ca_file or not verify):
        raise ConfigError("CRONLOG_CLICKHOUSE_CA_FILE and CRONLOG_CLICKHOUSE_VERIFY apply to TLS "
                          "only: set CRONLOG_CLICKHOUSE_SECURE=1 as well")
    if ca_file:
        try:
            Path(ca_file).read_bytes()
        except OSError as exc:
            raise ConfigError(f"CRONLOG_CLICKHOUSE_CA_FILE {ca_file}: cannot read: "
                              f"{exc.strerror}") from exc
    return ClickHouseTls(clickhouse_secure=secure, clickhouse_verify=verify,
                         clickhouse_ca_file=ca_file)
