"""librdkafka settings shared by every cronlog process. Every Kafka client cronlog builds
(producers, the owners' transactional producers, consumers, admin clients) takes its settings
from here, so the operator's CRONLOG_KAFKA_CONFIG (SASL, TLS, tuning) reaches all of them."""

from __future__ import annotations

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

def producer_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    return {
        "linger.ms": 5,
        **operator_settings(settings),
        **extra,
        "bootstrap.servers": settings.kafka_bootstrap,
        "partitioner": PARTITIONER,
        "enable.idempotence": True,
        "acks": "all",
    }


def transactional_producer_config(settings: Settings, transactional_id: str) -> dict[str, Any]:
    return producer_config(settings, **{
        "transactional.id": transactional_id,
        # A transaction left open by a dead owner blocks its partitions' new owner (their
        # committed offsets stay unstable) until the coordinator aborts it: no longer than
        # the group takes to notice the owner is gone (the 10 s session timeout). At 30 s a
        # scheduler killed mid-transaction left its runs 30 s late (chaos failover-lag).
        "transaction.timeout.ms": 10000,
    })


def consumer_config(settings: Settings, group_id: str | None, **extra: Any) -> dict[str, Any]:
    return {
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
    return {**operator_settings(settings), **extra, "bootstrap.servers": settings.kafka_bootstrap}
