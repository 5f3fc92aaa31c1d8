"""librdkafka settings shared by every cronlog process."""

from __future__ import annotations

from typing import Any

from cronlog.infra.config import Settings

# Every topic keyed by job_id must place a key on the same partition as Kafka's Java clients
# do, so that partition p of each topic belongs to the same owner.
PARTITIONER = "murmur2_random"


def producer_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": settings.kafka_bootstrap,
        "partitioner": PARTITIONER,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        **extra,
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
    config: dict[str, Any] = {
        "bootstrap.servers": settings.kafka_bootstrap,
        # Only committed owner transactions are facts; aborted zombie writes never count.
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **extra,
    }
    if group_id is not None:
        config["group.id"] = group_id
    else:
        config["group.id"] = "cronlog-unused"  # librdkafka requires one even for assign()
    return config


def admin_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": settings.kafka_bootstrap, **extra}
