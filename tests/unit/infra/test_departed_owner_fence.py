"""KafkaDepartedOwnerFence decides whom to fence from the schedulers' group: an earlier owner
still a member is alive and never fenced (it would stop for good)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from cronlog.infra.config import Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.kafka.departed_owners import KafkaDepartedOwnerFence
from cronlog.infra.kafka.scheduler_identity import scheduler_client_id

SETTINGS = settings_from_env({"CRONLOG_TOPIC_PREFIX": "t1."})


class Producers:
    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        self.made: list[str] = []
        self._failing = failing

    def __call__(self, config: dict[str, object]) -> Producers:
        self.made.append(str(config["transactional.id"]))
        return self

    def init_transactions(self, timeout: float) -> None:
        if any(self.made[-1].endswith(f"-owner-{o}") for o in self._failing):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))


def members(*instance_ids: str) -> object:
    return lambda _settings: frozenset(scheduler_client_id(i) for i in instance_ids)


def test_only_owners_gone_from_the_group_are_fenced_under_their_transactional_ids() -> None:
    producers = Producers()
    fence = KafkaDepartedOwnerFence(SETTINGS, members("alive"), producers)  # type: ignore[arg-type]
    assert fence.fence_departed(["dead", "alive"]) == ["dead"]
    assert producers.made == [f"{SETTINGS.group_prefix}-owner-dead"]


def test_nothing_is_fenced_when_the_group_cannot_be_described() -> None:
    producers = Producers()

    def unknown(_settings: Settings) -> frozenset[str] | None:
        return None

    fence = KafkaDepartedOwnerFence(SETTINGS, unknown, producers)
    assert fence.fence_departed(["dead"]) == []
    assert producers.made == []


def test_a_fence_that_fails_is_not_reported_and_the_others_go_on() -> None:
    producers = Producers(failing=frozenset({"a"}))
    fence = KafkaDepartedOwnerFence(SETTINGS, members(), producers)  # type: ignore[arg-type]
    assert fence.fence_departed(["b", "a"]) == ["b"]
    assert len(producers.made) == 2
