"""One walk over an Avro schema that assembles a prebuilt writer or reader from parts.

record_writer and record_reader give the parts for each type; the walk resolves named
types and logical types the same way for both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnsupportedSchema(ValueError):
    """A schema using a type the prebuilt writers and readers do not cover."""


@dataclass(frozen=True)
class Parts(Generic[T]):
    primitives: Mapping[str, T]
    logical: Mapping[tuple[str, str], T]
    # The union's branch schemas and their parts.
    union: Callable[[list[Any], list[T]], T]
    record: Callable[[str, list[tuple[str, T]]], T]
    array: Callable[[T], T]
    map: Callable[[T], T]


def assemble(schema: Mapping[str, Any], parts: Parts[T]) -> T | None:
    """The parts for this (unparsed, JSON) schema, or None when it uses a type they do not
    cover."""
    try:
        return _walk(dict(schema), parts, {})
    except UnsupportedSchema:
        return None


def _walk(schema: Any, parts: Parts[T], named: dict[str, Any]) -> T:
    if isinstance(schema, str):
        if schema in parts.primitives:
            return parts.primitives[schema]
        if schema in named:
            return _walk(named[schema], parts, named)
        raise UnsupportedSchema(f"type {schema!r}")
    if isinstance(schema, list):
        return parts.union(schema, [_walk(branch, parts, named) for branch in schema])
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical is not None:
        part = parts.logical.get((kind, logical))
        if part is None:
            raise UnsupportedSchema(f"logical type {logical!r} of {kind!r}")
        return part
    if kind == "record":
        named[schema["name"]] = schema
        if "namespace" in schema:
            named[f'{schema["namespace"]}.{schema["name"]}'] = schema
        return parts.record(schema["name"], [(f["name"], _walk(f["type"], parts, named))
                                             for f in schema["fields"]])
    if kind == "array":
        return parts.array(_walk(schema["items"], parts, named))
    if kind == "map":
        return parts.map(_walk(schema["values"], parts, named))
    if isinstance(kind, str | list) and set(schema) <= {"type", "doc"}:
        return _walk(kind, parts, named)
    raise UnsupportedSchema(f"type {kind!r}")
