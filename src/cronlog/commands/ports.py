"""The small interfaces through which the write side talks to the outside world."""

from __future__ import annotations


class TransactionRejected(RuntimeError):
    """The owner's Kafka transaction did not commit (or its outcome is unknown).

    fenced: this process is no longer the owner of its partitions (KIP-447 generation fencing,
    or another producer took its transactional id).
    """

    fenced: bool = False


class EpochLost(RuntimeError):
    """A newer owner took the partition's epoch: this owner's writes are refused."""
