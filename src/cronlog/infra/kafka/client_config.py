"""librdkafka settings shared by every cronlog process. Every Kafka client cronlog builds
(producers, the owners' transactional producers, consumers, admin clients) takes its settings
from here, so the operator's CRONLOG_KAFKA_CONFIG (SASL, TLS, tuning) reaches all of them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_connections import OWNED_KEYS

# Every topic keyed by job_id must place a key on the same partition as Kafka's Java clients
# do, so that partition p of each topic belongs to the same owner.
PARTITIONER = "murmur2_random"


def operator_settings(settings: Settings) -> dict[str, str]:
    """The operator's settings; config_env refuses cronlog's own keys, and Settings made in
    code are held to the same rule here."""
    config = dict(settings.kafka_config)
    owned = sorted(key for key in config if key in OWNED_KEYS)
    if owned:
        raise ConfigError(f"kafka_config may not set {', '.join(owned)}: "
                          + "; ".join(OWNED_KEYS[key] for key in owned))
    return config


# In each client the operator's settings override cronlog's tuning defaults, a client's own
# settings (extra) override those, and what correctness rests on comes last.

# How soon a client gets past a broker that died (kill -9, host lost). librdkafka learns a
# partition's new leader only from a metadata refresh: it asks once when the connection
# drops, when the controller still names the dead broker, and then not again for
# topic.metadata.refresh.interval.ms (5 minutes by default), so produces to its partitions
# waited out their message timeout (10 s in an owner's transaction) and a cycle failed
# even though the leaders had moved seconds earlier (chaos cluster-failover). Requests
# queued for a dead coordinator fail, and its successor is asked for, only when a
# reconnect fails, and reconnects back off up to reconnect.backoff.max.ms (10 s by default):
# a cycle waited 13 s on a transaction coordinator that had moved after 6. librdkafka's fast
# leader query does not help: it runs only for partitions with no leader at all. The costs:
# two metadata requests a second for the client's own topics, and a refused connection a
# second to a broker that is down; an operator with many clients or partitions may trade
# failover time for less metadata traffic (docs/operations.md).
FAILOVER_DEFAULTS: dict[str, Any] = {
    "topic.metadata.refresh.interval.ms": 500,
    "reconnect.backoff.max.ms": 1000,
}


def producer_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    return {
        **FAILOVER_DEFAULTS,
        "linger.ms": 5,
        **operator_settings(settings),
        **extra,
        "bootstrap.servers": settings.kafka_bootstrap,
        "partitioner": PARTITIONER,
        "enable.idempotence": True,
        "acks": "all",
    }


# How long an owner's transaction may stay open before the coordinator aborts it.
OWNER_TRANSACTION_TIMEOUT = timedelta(seconds=60)


def transactional_producer_config(settings: Settings, transactional_id: str) -> dict[str, Any]:
    return producer_config(settings, **{
        "transactional.id": transactional_id,
        # A transaction left open by a dead owner blocks every reader of its partitions
        # until it ends. The owner that takes them ends it at once (departed_owners.py), so
        # this bounds only what nobody takes over; it need not follow the session timeout,
        # and an owner's slow commit (seconds, with a Kafka partition per logical one) is no
        # abort.
        "transaction.timeout.ms": _millis(OWNER_TRANSACTION_TIMEOUT),
        # The coordinator writes a commit's markers after it acknowledges the commit, and
        # refuses the next transaction's first request with CONCURRENT_TRANSACTIONS until
        # they are written. An owner whose cycles follow each other closely (a busy one)
        # met it in about one cycle in twenty, and librdkafka retried after the default
        # 100 ms (measured: an AddOffsetsToTxn answered again 124 ms later). Retries still
        # back off exponentially, up to retry.backoff.max.ms, when a broker is away.
        "retry.backoff.ms": 10,
    })


def _millis(value: timedelta) -> int:
    return int(value / timedelta(milliseconds=1))


def owner_session_config(settings: Settings) -> dict[str, Any]:
    """The schedulers' group timing: how soon a silent owner loses its partitions."""
    session = _millis(settings.owner_session_timeout)
    # Six or more heartbeats within a session: one lost in a busy second is no eviction.
    return {"session.timeout.ms": session, "heartbeat.interval.ms": 1000}


def consumer_config(settings: Settings, group_id: str | None, **extra: Any) -> dict[str, Any]:
    return {
        **FAILOVER_DEFAULTS,
        "auto.offset.reset": "earliest",
        **operator_settings(settings),
        **extra,
        "bootstrap.servers": settings.kafka_bootstrap,
        # Only committed owner transactions are facts; aborted zombie writes never count.
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        # librdkafka requires a group id even for a consumer that only assign()s.
        "group.id": group_id if group_id is not None else "cronlog-unused",
    }


def admin_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    return {**FAILOVER_DEFAULTS, **operator_settings(settings), **extra,
            "bootstrap.servers": settings.kafka_bootstrap}
