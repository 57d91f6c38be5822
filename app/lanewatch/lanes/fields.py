"""The field checks that stamps and receipts share: load a versioned JSON object, take typed fields.

Each check says what is wrong in one line and leaves the status to the caller: a stamp and a
receipt map a rejection to their own `...Status` (the values are the same words). Types are
compared with `type(...) in`, not `isinstance`: `True` is not a pid or an exit code.
Pure functions, no third-party import (the scheme is core).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["oversized", "empty", "garbage", "future-schema"]


@dataclass(frozen=True, slots=True)
class Rejected:
    """Why bytes are not a usable object; `raw` is the object when it parsed at all."""

    kind: Kind
    detail: str
    raw: dict[str, Any] | None = field(default=None, repr=False)


def load_versioned(
    data: bytes, *, limit: int, schema: int, no_schema: str
) -> dict[str, Any] | Rejected:
    """A JSON object of at most `limit` bytes with an int `schema` in [1, `schema`].

    `no_schema` is the detail for a missing or invalid version (stamps and receipts word it
    differently). Never raises.
    """
    if len(data) > limit:
        return Rejected("oversized", f"larger than {limit} bytes")
    if not data.strip():
        return Rejected("empty", "empty file")
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return Rejected("garbage", f"not JSON: {str(exc)[:80]}")
    if not isinstance(obj, dict):
        return Rejected("garbage", "not a JSON object")
    version = obj.get("schema")
    if type(version) is not int or version < 1:
        return Rejected("garbage", no_schema, obj)
    if version > schema:
        detail = f"schema {version} is newer than this lanewatch understands ({schema})"
        return Rejected("future-schema", detail, obj)
    return obj


def take(
    obj: Mapping[str, Any],
    spec: Mapping[str, tuple[type, ...]],
    *,
    wrong: str,
    optional: bool = False,
    not_finite: str | None = None,
    into: dict[str, Any] | None = None,
) -> dict[str, Any] | str:
    """The fields of `spec` from `obj`, each of one of its exact types, or what is wrong.

    `wrong` (and `not_finite`, when floats must be finite: JSON allows NaN and Infinity) are
    templates with `{name!r}`. An `optional` field may be absent or null and is then None.
    The fields go `into` a dict given (one dict for several specs), else a new one.
    """
    values: dict[str, Any] = {} if into is None else into
    for name, types in spec.items():
        value = obj.get(name)
        if value is None:  # absent, or null: only null where a type allows it, or optional
            if not optional and (type(None) not in types or name not in obj):
                return wrong.format(name=name)
        elif type(value) not in types:
            return wrong.format(name=name)
        elif not_finite is not None and type(value) is float and not math.isfinite(value):
            return not_finite.format(name=name)
        values[name] = value
    return values


def strings(value: list[Any]) -> bool:
    """A list of strings only (a command line)."""
    return all(isinstance(part, str) for part in value)
