"""A librdkafka statistics document, as a client's stats callback gets it: one broker up or
down, consumer lags by partition."""

from __future__ import annotations

import json


def statistics(up: bool = True, lags: dict[str, int] | None = None) -> str:
    partitions = {p: {"partition": int(p), "fetch_state": "active", "consumer_lag": lag}
                  for p, lag in (lags or {}).items()}
    partitions["-1"] = {"partition": -1, "fetch_state": "none", "consumer_lag": -1}
    partitions["9"] = {"partition": 9, "fetch_state": "none", "consumer_lag": 500}
    return json.dumps({
        "msg_cnt": 3,
        "brokers": {
            "127.0.0.1:9092/bootstrap": {"nodeid": -1, "state": "UP", "rtt": {"avg": 0}},
            "127.0.0.1:9092/1": {"nodeid": 1, "state": "UP" if up else "DOWN",
                                 "rtt": {"avg": 2500}},
        },
        "topics": {"cronlog.dispatch.default": {"partitions": partitions}},
    })
