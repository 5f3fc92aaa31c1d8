"""One live scheduler per CRONLOG_INSTANCE_ID.

The instance id names the owner's transactional producer: a second process with the same id
would fence the first (and, restarted by a supervisor, the first would fence it back). So a
scheduler looks at the schedulers' consumer group before it joins: while a member with its
client id is there, it waits; a member that is still there after a session timeout is a
live process, and this one refuses to start. Two started at the same instant can both pass;
the one fenced then exits (processes.run_scheduler), so the check is a guard, not a lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.kafka.client_config import admin_config

log = logging.getLogger(__name__)

# Beyond the owner consumer's session timeout: a member of a process that died without
# leaving (kill -9) is gone from the group by then.
WAIT_BEYOND_SESSION = 5.0
DESCRIBE_TRIES = 3


class InstanceIdInUse(ConfigError):
    """A live scheduler process already uses this CRONLOG_INSTANCE_ID."""


def scheduler_client_id(instance_id: str) -> str:
    """The client.id of a scheduler's inbox consumer: how the group shows its instance id."""
    return f"cronlog-scheduler-{instance_id}"


def schedulers_group(settings: Settings) -> str:
    return f"{settings.group_prefix}-schedulers"


def owner_transactional_id(settings: Settings, instance_id: str) -> str:
    """The transactional id of the owner producer of the scheduler named instance_id."""
    return f"{settings.group_prefix}-owner-{instance_id}"


def group_members(settings: Settings) -> list[tuple[str, str]] | None:
    """(client id, member id) of each member of the schedulers' group now; None if the
    group cannot be described."""
    admin = AdminClient(admin_config(settings))
    group = schedulers_group(settings)
    for attempt in range(DESCRIBE_TRIES):
        try:
            description = admin.describe_consumer_groups([group], request_timeout=10)[group] \
                .result(timeout=15)
            return [(m.client_id, m.member_id) for m in description.members]
        except KafkaException as exc:
            # NOT_COORDINATOR and the like pass as the coordinator settles.
            if attempt + 1 == DESCRIBE_TRIES or not exc.args[0].retriable():
                log.warning("cannot describe consumer group %s: %s", group, exc)
                return None
            time.sleep(0.2)
    return None


def group_client_ids(settings: Settings) -> frozenset[str] | None:
    members = group_members(settings)
    return None if members is None else frozenset(client for client, _ in members)


def group_member_hosts(settings: Settings, client_id: str) -> Sequence[str]:
    """Hosts of the schedulers' group members with this client id; empty if unknown."""
    admin = AdminClient(admin_config(settings))
    group = schedulers_group(settings)
    try:
        description = admin.describe_consumer_groups([group], request_timeout=10)[group] \
            .result(timeout=15)
    except KafkaException as exc:
        # The transactional fencing still stops a duplicate; not knowing is no reason to
        # keep a scheduler from starting.
        log.warning("cannot describe consumer group %s (%s); not checking whether "
                    "CRONLOG_INSTANCE_ID is in use", group, exc)
        return ()
    return [m.host for m in description.members if m.client_id == client_id]


def refuse_if_in_use(settings: Settings, wait: float | None = None,
                     members: Callable[[Settings, str], Sequence[str]] = group_member_hosts,
                     sleep: Callable[[float], None] = time.sleep,
                     monotonic: Callable[[], float] = time.monotonic) -> None:
    if wait is None:
        wait = settings.owner_session_timeout.total_seconds() + WAIT_BEYOND_SESSION
    client_id = scheduler_client_id(settings.instance_id)
    deadline = monotonic() + wait
    hosts = members(settings, client_id)
    if hosts:
        log.info("a scheduler with CRONLOG_INSTANCE_ID %r is in the group (host %s); "
                 "waiting up to %.0fs for it to leave", settings.instance_id, hosts[0], wait)
    while hosts:
        if monotonic() >= deadline:
            raise InstanceIdInUse(
                f"CRONLOG_INSTANCE_ID {settings.instance_id!r} is in use by a running "
                f"scheduler (host {hosts[0].lstrip('/')}); give every scheduler its own "
                "CRONLOG_INSTANCE_ID, or leave it unset for a unique default")
        sleep(1.0)
        hosts = members(settings, client_id)
