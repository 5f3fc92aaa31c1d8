"""What-if's CHANGES: each field named replaces the job's own; a wrong one is refused naming
it, as the api would."""

from __future__ import annotations

import pytest

from cronlog.cli.job_spec import UsageError
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.policies import MisfirePolicy
from cronlog.domain.spec import JobSpec
from cronlog.infra.entrypoints.what_if import proposed_spec

CURRENT = JobSpec(name="nightly", tenant="billing", queue="default", handler="echo",
                  cron="0 3 * * *", time_zone="Europe/Berlin", labels={"team": "a"})


def test_the_fields_named_replace_the_jobs_own() -> None:
    spec = proposed_spec(CURRENT, {"cron": "0 */2 * * *", "misfirePolicy":
                                   "MISFIRE_POLICY_RUN_ALL", "labels": {"team": "b"}})
    assert spec.cron == "0 */2 * * *" and spec.misfire_policy == MisfirePolicy.RUN_ALL
    assert spec.labels == {"team": "b"}
    assert (spec.name, spec.time_zone, spec.handler) == ("nightly", "Europe/Berlin", "echo")
    every = proposed_spec(CURRENT, {"every": "900s"})
    assert every.cron is None and every.every is not None and every.every.seconds == 900


@pytest.mark.parametrize(("changes", "error", "message"), [
    ({"cronn": "* * * * *"}, UsageError, "--spec: .*cronn"),
    (["cron"], UsageError, "--spec: a JSON object"),
    ({"tenant": "other"}, InvalidSpec, "spec.tenant: a job cannot move to another tenant"),
    ({"cron": "61 * * * *"}, InvalidSpec, "spec.schedule.cron"),
    ({"timeZone": "Mars/Olympus"}, InvalidSpec, "spec.time_zone"),
])
def test_a_wrong_change_is_refused_naming_it(changes: object, error: type[Exception],
                                             message: str) -> None:
    with pytest.raises(error, match=message):
        proposed_spec(CURRENT, changes)  # type: ignore[arg-type]
