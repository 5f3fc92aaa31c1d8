"""The message catalogue is the one list of message names: each has its Avro schema, the
aggregates' events are exactly its job and run events, and no code names a message by a
bare string instead of a catalogue member."""

from __future__ import annotations

import re
from pathlib import Path

from cronlog.domain.catalogue import CATALOGUE, JobEvent, RunEvent
from cronlog.domain.job import Job
from cronlog.domain.run import Run

SRC = Path(__file__).resolve().parents[3] / "src" / "cronlog"
NAMES = {member.value for kind in CATALOGUE for member in kind}


def aggregate_events(aggregate: type) -> set[str]:
    base = aggregate.Event  # type: ignore[attr-defined]
    return {name for name, value in vars(aggregate).items()
            if isinstance(value, type) and issubclass(value, base)
            and name not in ("Event", "Created")}


def test_every_name_has_an_avro_schema_and_every_schema_a_name() -> None:
    schemas = {re.sub(r"\.v\d+\.avsc$", "", p.name)
               for p in (SRC / "infra" / "avro" / "schemas").glob("*.avsc")}
    assert schemas == NAMES


def test_the_aggregates_events_are_the_catalogues_job_and_run_events() -> None:
    assert aggregate_events(Job) == {e.value for e in JobEvent} - {JobEvent.REQUEST_APPLIED}
    assert aggregate_events(Run) == {e.value for e in RunEvent}


def test_no_code_names_a_message_by_a_bare_string() -> None:
    bare = re.compile(r'"(' + "|".join(sorted(NAMES)) + r')"')
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "catalogue.py" or "v1" in path.parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            # The aggregates declare their events by name: the test above ties those names
            # to the catalogue.
            if bare.search(line) and "@event(" not in line:
                found.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
