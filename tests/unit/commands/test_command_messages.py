"""Each command is one class (commands/messages.py), and the class, its Avro schema, its
stored sample and the owner's handler agree: a command missing any of them fails here, not
at run time (issue 35, item 1)."""

from __future__ import annotations

from pathlib import Path

from cronlog.commands.messages import (
    BY_NAME,
    COMMAND_TYPES,
    field_names,
)
from cronlog.commands.owner import job_commands, request_ids
from cronlog.domain.catalogue import Command
from cronlog.infra.avro.codec import AvroCodec
from tests.support.clock import FakeClock
from tests.support.owner import make_owner
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport

SAMPLES = Path(__file__).resolve().parents[1] / "avro" / "samples"


def test_every_command_has_one_class() -> None:
    assert sorted(BY_NAME) == sorted(Command)
    assert len(COMMAND_TYPES) == len(set(COMMAND_TYPES)) == len(Command)


def test_each_class_has_exactly_its_newest_schemas_fields() -> None:
    newest = {}
    for version in AvroCodec().versions():
        newest[version.name] = version
    for kind in COMMAND_TYPES:
        schema = newest.get(kind.NAME)
        assert schema is not None, f"{kind.NAME} has no Avro schema"
        assert sorted(f["name"] for f in schema.raw["fields"]) == sorted(field_names(kind)), (
            f"{kind.__name__} and {kind.NAME}.v{schema.version}.avsc differ")
        assert set(kind.MEANINGFUL) <= set(field_names(kind)), kind.__name__


def test_each_command_has_a_stored_sample() -> None:
    for kind in COMMAND_TYPES:
        assert list(SAMPLES.glob(f"{kind.NAME}.v*.bin")), f"no sample of {kind.NAME}"


def test_the_owner_has_a_handler_for_every_command() -> None:
    owner = make_owner(FakeStore(), FakeTransport(), FakeClock())
    missing = [kind.NAME for kind in COMMAND_TYPES if kind.NAME not in owner._handler_of]
    assert not missing, f"no owner handler for {missing}"


def test_the_owners_tables_say_what_the_classes_say() -> None:
    # Every command but the calendars' and the channels' is keyed by a job, whose row a
    # cycle reads ahead.
    own_keys = {Command.CREATE_CALENDAR, Command.UPDATE_CALENDAR, Command.CREATE_CHANNEL,
                Command.UPDATE_CHANNEL, Command.DELETE_CHANNEL, Command.ROTATE_CHANNEL_SECRET}
    assert set(Command) - own_keys == job_commands.ON_JOBS
    # A retried request repeats these; `at` and the correlation id differ per send.
    assert request_ids.MEANINGFUL_FIELDS[Command.UPDATE_JOB] == ("expected_version", "spec")
    assert request_ids.MEANINGFUL_FIELDS[Command.PAUSE_JOB] == ()
    assert all("at" not in fields and "correlation_id" not in fields
               for fields in request_ids.MEANINGFUL_FIELDS.values())
