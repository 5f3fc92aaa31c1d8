"""Handlers from the user's own code (docs/handlers.md): every @handler function named by an
installed package's `cronlog.handlers` entry points and by CRONLOG_WORKER_HANDLERS
(`module[:attr]`). Anything that cannot be loaded, or two handlers of one name, stops the
worker at start with a message naming where each came from."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from types import ModuleType
from typing import Any

from cronlog.sdk import ENTRY_POINT_GROUP, handler_name
from cronlog.worker.sdk_adapter import SdkHandler

# module[:attr]: dotted Python names.
SPEC_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
                          r"(:[A-Za-z_][A-Za-z0-9_]*)?")
MAX_SPECS = 100


class HandlerLoadError(Exception):
    """A handler module or entry point cannot be loaded, or two handlers share a name."""


def check_specs(specs: Sequence[str], setting: str) -> tuple[str, ...]:
    """The `module[:attr]` items of a setting; a malformed one is named."""
    if len(specs) > MAX_SPECS:
        raise ValueError(f"{setting}: at most {MAX_SPECS} items, not {len(specs)}")
    for spec in specs:
        if len(spec) > 512 or not SPEC_PATTERN.fullmatch(spec):
            raise ValueError(f"{setting}: {spec[:80]!r} is not module[:attr] (dotted Python "
                             "names, e.g. mypackage.jobs or mypackage.jobs:backup)")
    return tuple(specs)


def _handlers_in(thing: object, source: str) -> list[tuple[str, Callable[..., Any]]]:
    name = handler_name(thing)
    if name is not None:
        return [(name, thing)]  # type: ignore[list-item]
    if isinstance(thing, ModuleType):
        found = [(n, v) for v in vars(thing).values() if (n := handler_name(v)) is not None]
        if not found:
            raise HandlerLoadError(f"{source}: the module has no @handler functions")
        return found
    raise HandlerLoadError(f"{source} is a {type(thing).__name__}, neither a @handler "
                           "function nor a module of them")


def _loaded(specs: Sequence[str],
            entry_points: Iterable[importlib.metadata.EntryPoint]) -> Iterable[tuple[str, object]]:
    for point in entry_points:
        source = f"entry point {point.name!r} ({point.value}) of group {ENTRY_POINT_GROUP}"
        try:
            yield source, point.load()
        except Exception as exc:
            raise HandlerLoadError(f"{source} cannot be loaded: "
                                   f"{type(exc).__name__}: {exc}") from exc
    for spec in specs:
        module_name, _, attribute = spec.partition(":")
        source = f"CRONLOG_WORKER_HANDLERS item {spec!r}"
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise HandlerLoadError(f"{source}: module {module_name!r} cannot be imported: "
                                   f"{type(exc).__name__}: {exc}") from exc
        if attribute and not hasattr(module, attribute):
            raise HandlerLoadError(f"{source}: module {module_name!r} has no {attribute!r}")
        yield source, getattr(module, attribute) if attribute else module


def load_user_handlers(
        specs: Sequence[str], built_in: Collection[str],
        entry_points: Callable[[], Iterable[importlib.metadata.EntryPoint]] | None = None,
) -> dict[str, SdkHandler]:
    """Every user handler by name. The same function found twice (an entry point and the
    setting naming one module) is one handler."""
    points = (entry_points() if entry_points is not None
              else importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    found: dict[str, tuple[str, Callable[..., Any]]] = {}
    for source, thing in _loaded(specs, points):
        for name, function in _handlers_in(thing, source):
            if name in built_in:
                raise HandlerLoadError(f"{source}: handler {name!r} has the name of a "
                                       "built-in handler; rename it")
            known = found.get(name)
            if known is not None and known[1] is not function:
                raise HandlerLoadError(f"two handlers are named {name!r}: {known[1]!r} from "
                                       f"{known[0]}, and {function!r} from {source}")
            found.setdefault(name, (source, function))
    return {name: SdkHandler(name, function) for name, (_, function) in found.items()}
