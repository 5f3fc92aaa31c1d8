"""A job's runs proved from the run events against its fire chain: exactly one run for each
fire, none for a fire time recorded missed or never fired, every attempt ended exactly once,
no attempt beyond the retry policy, and every run ended once (a re-drive opens it again).

Cost: one pass over the job's run events, plus one look per missed range for each
scheduled run (a job's ranges are few: one per stretch of misses).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cronlog.domain.catalogue import RunEvent
from cronlog.verification.findings import Check, Evidence, JobVerdict, run_evidence
from cronlog.verification.fire_chain import FireChain
from cronlog.verification.window import Window

Record = Mapping[str, Any]

CREATES_RUN = frozenset({RunEvent.SCHEDULED, RunEvent.MISSED, RunEvent.SKIPPED})
ENDS_ATTEMPT = frozenset({RunEvent.ATTEMPT_SUCCEEDED, RunEvent.ATTEMPT_FAILED,
                          RunEvent.ATTEMPT_LOST, RunEvent.ATTEMPT_TIMED_OUT,
                          RunEvent.ATTEMPT_CANCELLED})
# How each event ends its run; RunSucceeded (older logs) repeats its AttemptSucceeded.
RUN_OUTCOMES = {RunEvent.ATTEMPT_SUCCEEDED: "succeeded", RunEvent.SUCCEEDED: "succeeded",
                RunEvent.FAILED: "dead-lettered", RunEvent.CANCELLED: "cancelled"}


@dataclass
class RunStory:
    """One run's events, in the order of their versions."""

    run_id: str
    events: list[tuple[str, Record]] = field(default_factory=list)

    @property
    def creations(self) -> list[tuple[str, Record]]:
        return [(n, r) for n, r in self.events if n in CREATES_RUN]


def stories(run_events: Sequence[tuple[str, Record]]) -> dict[str, RunStory]:
    by_run: dict[str, RunStory] = {}
    for name, record in run_events:
        run_id = str(record["run_id"])
        by_run.setdefault(run_id, RunStory(run_id)).events.append((name, record))
    for story in by_run.values():
        story.events.sort(key=lambda e: int(e[1]["version"]))
    return by_run


def check_runs(chain: FireChain, runs: Mapping[str, RunStory], window: Window,
               settled_before: datetime, verdict: JobVerdict) -> None:
    _check_fires(chain, runs, window, verdict)
    _check_scheduled_runs(chain, runs, window, verdict)
    for story in runs.values():
        creations = story.creations
        if not creations:
            continue  # created before what was read: its fire time is before the window
        _, created = creations[0]
        if not window.holds(_fire_time_of(created)):
            continue
        verdict.tally.runs += 1
        if created.get("trigger", "schedule") in ("manual", "backfill"):
            verdict.tally.manual_runs += 1
        _check_attempts(story, created, settled_before, verdict)
        _check_run_ends(story, verdict)


def _fire_time_of(record: Record) -> datetime:
    value: datetime = record["scheduled_at"]
    return value


def _check_fires(chain: FireChain, runs: Mapping[str, RunStory], window: Window,
                 verdict: JobVerdict) -> None:
    for fire in chain.fires:
        if not window.holds(fire.fire_time):
            continue
        story = runs.get(fire.run_id)
        creations = story.creations if story is not None else []
        if not creations:
            verdict.violate(Check.FIRE_WITHOUT_RUN,
                            f"fired {fire.fire_time.isoformat()} as run {fire.run_id}, which "
                            "the run events do not hold", fire.fire_time, fire.run_id,
                            (fire.evidence,))
            continue
        if len(creations) > 1:
            verdict.violate(Check.FIRE_TIME_DOUBLED,
                            f"run {fire.run_id} of {fire.fire_time.isoformat()} was created "
                            f"{len(creations)} times", fire.fire_time, fire.run_id,
                            (fire.evidence, *(run_evidence(n, r) for n, r in creations)))
        name, created = creations[0]
        if _fire_time_of(created) != fire.fire_time:
            verdict.violate(Check.FIRE_TIME_OFF_SCHEDULE,
                            f"run {fire.run_id} is of {_fire_time_of(created).isoformat()}, "
                            f"its fire of {fire.fire_time.isoformat()}", fire.fire_time,
                            fire.run_id, (fire.evidence, run_evidence(name, created)))


def _check_scheduled_runs(chain: FireChain, runs: Mapping[str, RunStory], window: Window,
                          verdict: JobVerdict) -> None:
    """The scheduled runs against the fires: one run per fire time, of a fire."""
    fired = {fire.run_id for fire in chain.fires}
    by_time: dict[datetime, list[tuple[str, Record]]] = defaultdict(list)
    for story in runs.values():
        for name, record in story.creations[:1]:
            if record.get("trigger", "schedule") != "schedule":
                continue
            fire_time = _fire_time_of(record)
            if not window.holds(fire_time):
                continue
            by_time[fire_time].append((name, record))
            evidence = run_evidence(name, record)
            if story.run_id not in fired:
                verdict.violate(Check.RUN_WITHOUT_FIRE,
                                f"run {story.run_id} of {fire_time.isoformat()} was scheduled, "
                                "and the job's events hold no fire of it", fire_time,
                                story.run_id, (evidence,))
            for missed in chain.missed:
                if missed.first <= fire_time <= missed.last:
                    verdict.violate(Check.FIRE_TIME_DOUBLED,
                                    f"{fire_time.isoformat()} was run as {story.run_id} and "
                                    "recorded missed", fire_time, story.run_id,
                                    (missed.evidence, evidence))
    for fire_time, created in sorted(by_time.items(), key=lambda item: item[0]):
        if len(created) > 1:
            verdict.violate(Check.FIRE_TIME_DOUBLED,
                            f"{fire_time.isoformat()} has {len(created)} runs: "
                            + ", ".join(str(r["run_id"]) for _, r in created), fire_time,
                            evidence=tuple(run_evidence(n, r) for n, r in created))


def _check_attempts(story: RunStory, created: Record, settled_before: datetime,
                    verdict: JobVerdict) -> None:
    fire_time = _fire_time_of(created)
    max_attempts = int(created.get("max_attempts") or 1)
    base = 0
    # Each attempt: when it was due to have ended at the latest, and its dispatch.
    open_attempts: dict[int, tuple[datetime, Evidence]] = {}
    ended: Counter[int] = Counter()
    ends: dict[int, list[Evidence]] = defaultdict(list)
    for name, record in story.events:
        attempt = int(record.get("attempt") or 0)
        dispatched = (name == RunEvent.ATTEMPT_DISPATCHED
                      or (name == RunEvent.SCHEDULED and attempt > 0))
        if name == RunEvent.REDRIVEN:
            base = int(record["attempts_before"])
        elif dispatched:
            verdict.tally.attempts += 1
            if attempt - base > 1:
                verdict.tally.retries += 1
            evidence = run_evidence(name, record)
            deadline = record["not_before"] + timedelta(milliseconds=int(
                record.get("timeout_ms") or 0))
            open_attempts[attempt] = (deadline, evidence)
            if attempt - base > max_attempts:
                verdict.violate(Check.RETRY_BEYOND_POLICY,
                                f"attempt {attempt} dispatched; the run allows {max_attempts}"
                                + (f" after the re-drive at attempt {base}" if base else ""),
                                fire_time, story.run_id, (evidence,))
        elif name in ENDS_ATTEMPT:
            ended[attempt] += 1
            ends[attempt].append(run_evidence(name, record))
    for attempt, count in sorted(ended.items()):
        if count > 1:
            verdict.violate(Check.ATTEMPT_ENDED_TWICE,
                            f"attempt {attempt} ended {count} times", fire_time,
                            story.run_id, tuple(ends[attempt]))
    for attempt, (deadline, evidence) in sorted(open_attempts.items()):
        if not ended[attempt] and deadline < settled_before:
            verdict.violate(Check.ATTEMPT_WITHOUT_END,
                            f"attempt {attempt}, due to end by {deadline.isoformat()}, has "
                            "no end in the log", fire_time, story.run_id, (evidence,))


def _check_run_ends(story: RunStory, verdict: JobVerdict) -> None:
    outcome: tuple[str, Evidence] | None = None
    for name, record in story.events:
        if name == RunEvent.REDRIVEN:
            outcome = None
            continue
        now = RUN_OUTCOMES.get(RunEvent(name)) if name in RUN_OUTCOMES else None
        if now is None:
            continue
        evidence = run_evidence(name, record)
        if outcome is not None and not (now == outcome[0] == "succeeded"
                                        and name == RunEvent.SUCCEEDED):
            verdict.violate(Check.RUN_ENDED_TWICE,
                            f"run ended {outcome[0]}, then {now}, with no re-drive between",
                            story.creations[0][1]["scheduled_at"], story.run_id,
                            (outcome[1], evidence))
        outcome = outcome or (now, evidence)
