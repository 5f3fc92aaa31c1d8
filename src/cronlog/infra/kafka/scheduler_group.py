"""KafkaSchedulerGroup: which scheduler the group coordinator gave each inbox partition to."""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from cronlog.commands.api.ports import GroupMember
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config
from cronlog.infra.kafka.scheduler_identity import scheduler_client_id, schedulers_group
from cronlog.ports import LogUnavailable

# Bounded well below the api's readiness interval times a few: a slow broker makes the
# api "not known", never stuck.
DESCRIBE_TIMEOUT = 5.0
_CLIENT_PREFIX = scheduler_client_id("")


class KafkaSchedulerGroup:
    def __init__(self, settings: Settings) -> None:
        self._admin = AdminClient(admin_config(settings))
        self._group = schedulers_group(settings)
        self._inbox = settings.inbox_topic

    def members_by_partition(self) -> Mapping[int, GroupMember]:
        try:
            description = self._admin.describe_consumer_groups(
                [self._group], request_timeout=DESCRIBE_TIMEOUT)[self._group] \
                .result(timeout=DESCRIBE_TIMEOUT * 2)
        except KafkaException as exc:
            raise LogUnavailable(f"scheduler group {self._group}: {exc}") from exc
        assigned: dict[int, GroupMember] = {}
        for member in description.members:
            scheduler = member.client_id.removeprefix(_CLIENT_PREFIX)
            for tp in member.assignment.topic_partitions or ():
                if tp.topic == self._inbox:
                    assigned[tp.partition] = GroupMember(member.member_id, scheduler)
        return assigned
