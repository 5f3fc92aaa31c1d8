"""Hypothesis draws that do not depend on what else the session imported.

Hypothesis (6.131 on, pinned in pyproject.toml) now and then draws, instead of a random
value, a literal it read from the source of a local module: any module of src/ that is in
sys.modules at the time of the draw. Which of them are imported depends on the tests that
ran before in the session, and their literals on everyone's edits to src/: with the
`cronlog` profile's derandomize=True a property test still drew other examples in a
whole-folder run than alone, and passed or failed accordingly. `constants_of` pins that
pool, for one test, to the literals of the modules it names (the code under test, whose
boundaries are the values worth drawing), in a fixed order.

tests/conftest.py pins it so for every property test of the suite: to the modules its test
module lists in HYPOTHESIS_LITERALS, or else to the cronlog modules the test module imports
or imports from (`modules_under_test`). Either depends on the test's own source, never on
which tests ran before it.

It replaces a private function of Hypothesis: an upgrade that renames it fails here, loudly,
rather than letting the draws drift again.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants, constants_from_module
from hypothesis.internal.floats import float_to_int
from sortedcontainers import SortedSet

# The packages whose literals are worth drawing: the project's own (Hypothesis reads none
# from tests/ either).
PROJECT_PACKAGES = frozenset({"cronlog", "cronlog_dev"})


def _pool(modules: tuple[ModuleType, ...]) -> Constants:
    # Sorted like Hypothesis's own pool: a set of strings iterates in an order that
    # changes with PYTHONHASHSEED, and the draw picks by position.
    pool = Constants(integers=SortedSet(), floats=SortedSet(key=float_to_int),
                     bytes=SortedSet(), strings=SortedSet())
    for module in modules:
        pool = pool | constants_from_module(module)
    return pool


@contextmanager
def constants_of(*modules: ModuleType) -> Iterator[Constants]:
    """While open, Hypothesis's local constants are the literals of `modules` only."""
    pool = _pool(modules)
    original = providers._get_local_constants
    providers._get_local_constants = lambda: pool
    # Values allowed per draw are cached from the pool before: computed again from ours.
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield pool
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()


def modules_under_test(test_module: ModuleType) -> tuple[ModuleType, ...]:
    """The modules whose literals the property tests of `test_module` draw from: its
    HYPOTHESIS_LITERALS, or else every project module it imports or imports a name from."""
    named = getattr(test_module, "HYPOTHESIS_LITERALS", None)
    if named is not None:
        return tuple(named)
    found: dict[str, ModuleType] = {}
    for value in vars(test_module).values():
        module = value if isinstance(value, ModuleType) else sys.modules.get(
            str(getattr(value, "__module__", "")))
        if module is not None and module.__name__.split(".")[0] in PROJECT_PACKAGES:
            found[module.__name__] = module
    return tuple(found[name] for name in sorted(found))
