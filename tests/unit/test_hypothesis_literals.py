"""Property tests draw alike in any session: while one runs, the literals Hypothesis mixes
into its draws are those of its code under test (tests/conftest.py, pinned_constants.py),
not those of every module the session imported before it."""

from __future__ import annotations

import types
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers

from cronlog.domain import bounds as bounds_module
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.schedule import CronSchedule
from tests.unit.projections.pinned_constants import _pool, modules_under_test

HYPOTHESIS_LITERALS = (bounds_module,)
KINDS = ("integer", "float", "bytes", "string")


def literals(pool: object) -> dict[str, list[object]]:
    # In order: a draw picks a literal by its position.
    return {kind: list(pool.set_for_type(kind)) for kind in KINDS}  # type: ignore[attr-defined]


@given(st.integers())
def test_a_property_test_draws_from_the_literals_its_module_names_only(number: int) -> None:
    assert literals(providers._get_local_constants()) == literals(_pool((bounds_module,)))


def test_without_a_list_the_modules_are_the_project_modules_the_test_imports_from() -> None:
    test_module = types.ModuleType("tests.unit.example")
    test_module.__dict__.update(CronSchedule=CronSchedule, InvalidSpec=InvalidSpec,
                                bounds=bounds_module, timedelta=timedelta, st=st, given=given,
                                types=types)
    assert [m.__name__ for m in modules_under_test(test_module)] == [
        "cronlog.domain.bounds", "cronlog.domain.errors", "cronlog.domain.schedule"]
    test_module.HYPOTHESIS_LITERALS = (bounds_module,)  # type: ignore[attr-defined]
    assert modules_under_test(test_module) == (bounds_module,)
