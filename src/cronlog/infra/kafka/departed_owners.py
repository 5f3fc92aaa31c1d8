"""KafkaDepartedOwnerFence: at a takeover, ends the open transaction of a scheduler that left
the group without handing over (killed, cut off, frozen past its session).

A dead owner's open transaction keeps the last stable offset of every partition it wrote to
where it began: read_committed readers, the workers among them, see nothing behind it, the
new owner's dispatches included, until the transaction coordinator aborts it. Left to the
coordinator, that is the transaction timeout plus up to the broker's abort check interval
(`transaction.abort.timed.out.transaction.cleanup.interval.ms`, 10 s by default) after the
transaction began. Starting a producer with the departed owner's transactional id settles
it now: the coordinator aborts the open transaction and bumps the producer epoch before
`init_transactions` returns (KIP-98), so the takeover's catch-up reads past it and the new
owner's writes become readable at once. The transaction timeout then need not follow the
session timeout (docs/operations.md, "Failover timing").

Only an owner missing from the schedulers' group is fenced: a member still there is alive
(a cooperative hand-over commits before it lets go), and fencing it would stop it for good.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from typing import Protocol

from confluent_kafka import KafkaException, Producer

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import transactional_producer_config
from cronlog.infra.kafka.scheduler_identity import (
    group_client_ids,
    owner_transactional_id,
    scheduler_client_id,
)

log = logging.getLogger(__name__)

# How long one fence may take: the coordinator aborts the open transaction (its markers
# written) before it answers. Bounded, since the owner's loop waits meanwhile.
FENCE_TIMEOUT = 10.0


class ProducerLike(Protocol):
    def init_transactions(self, timeout: float) -> None: ...


class KafkaDepartedOwnerFence:
    def __init__(self, settings: Settings,
                 members: Callable[[Settings], frozenset[str] | None] = group_client_ids,
                 producer: Callable[[dict[str, object]], ProducerLike] = Producer) -> None:
        self._settings = settings
        self._members = members
        self._producer = producer

    def fence_departed(self, owners: Collection[str]) -> list[str]:
        """Fences those of `owners` (instance ids) no longer in the schedulers' group;
        returns those fenced. Nothing is fenced when the group cannot be described: the
        coordinator's timeout then settles what they left open."""
        if not owners:
            return []
        live = self._members(self._settings)
        if live is None:
            log.warning("not fencing departed owners %s: the schedulers' group cannot be "
                        "described; their open transactions end at the transaction timeout",
                        sorted(owners))
            return []
        fenced: list[str] = []
        for owner in sorted(owners):
            if scheduler_client_id(owner) in live:
                continue
            began = time.monotonic()
            transactional_id = owner_transactional_id(self._settings, owner)
            try:
                self._producer(transactional_producer_config(self._settings, transactional_id)) \
                    .init_transactions(FENCE_TIMEOUT)
            except KafkaException as exc:
                log.warning("fencing departed owner %s failed (%s); its open transaction "
                            "ends at the transaction timeout", owner, exc)
                continue
            fenced.append(owner)
            log.info("fenced departed owner %s (transactional id %s): whatever it left open "
                     "is aborted, in %.2fs", owner, transactional_id, time.monotonic() - began)
        return fenced
