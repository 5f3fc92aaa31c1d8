"""A reply goes to the partition of the api that asked: the reply key its correlation id
names (issue 34); an older api's correlation id keys it by the command, as before."""

from __future__ import annotations

from cronlog.commands.owner.owner_messages import reply
from cronlog.commands.owner.ports import Topics
from cronlog.commands.reply_routes import MAX_REPLY_KEY, reply_key, routed
from cronlog.domain.partition_layout import partition_for

TOPICS = Topics("job-events", "run-events", "replies", lambda q: f"dispatch.{q}")


def test_a_routed_correlation_id_names_its_reply_key() -> None:
    assert reply_key(routed("api-0123", "abc")) == "api-0123"
    assert reply_key(routed("api-0123", "abc/def")) == "api-0123", "the first separator"


def test_no_or_a_malformed_reply_key_names_none() -> None:
    for correlation in (None, "", "0123abcd", "/abc", "k" * (MAX_REPLY_KEY + 1) + "/x",
                        "tab\there/x"):
        assert reply_key(correlation) is None, correlation


def test_the_reply_is_keyed_for_the_api_that_asked() -> None:
    out = reply(TOPICS, "r1", True, correlation_id=routed("api-7", "c1"), key="job-1")
    assert (out.topic, out.key) == ("replies", "api-7")
    assert out.record["correlation_id"] == "api-7/c1", "copied whole for the api to match"
    older = reply(TOPICS, "r1", True, correlation_id="c1", key="job-1")
    assert older.key == "job-1", "an older api's command: by the command's key"


def test_apis_spread_over_the_partitions() -> None:
    # Each api takes a random reply key; a few hundred of them reach most of 64 partitions.
    keys = [f"api-{n:016x}" for n in range(300)]
    assert len({partition_for(k, 64) for k in keys}) > 48
