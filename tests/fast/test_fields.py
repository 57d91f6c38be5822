"""The shared field checks under stamps and receipts: a versioned JSON object, typed fields."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lanewatch.lanes.fields import Rejected, load_versioned, strings, take

NO_SCHEMA = "no schema here"


def load(obj: object, limit: int = 1024) -> dict[str, Any] | Rejected:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return load_versioned(data, limit=limit, schema=2, no_schema=NO_SCHEMA)


def test_a_versioned_object_comes_back_as_it_is() -> None:
    assert load({"schema": 2, "x": 1}) == {"schema": 2, "x": 1}
    assert load({"schema": 1}) == {"schema": 1}


@pytest.mark.parametrize(
    ("data", "kind", "detail", "has_raw"),
    [
        (b"x" * 1025, "oversized", "larger than 1024 bytes", False),
        (b" \n", "empty", "empty file", False),
        (b'{"schema": 1', "garbage", "not JSON", False),
        (b"[1, 2]", "garbage", "not a JSON object", False),
        (b"{}", "garbage", NO_SCHEMA, True),
        (b'{"schema": true}', "garbage", NO_SCHEMA, True),
        (b'{"schema": 0}', "garbage", NO_SCHEMA, True),
        (b'{"schema": 3}', "future-schema", "schema 3 is newer", True),
    ],
)
def test_what_is_not_a_usable_object_says_why(
    data: bytes, kind: str, detail: str, has_raw: bool
) -> None:
    got = load(data)
    assert isinstance(got, Rejected)
    assert got.kind == kind and got.detail.startswith(detail)
    assert (got.raw is not None) is has_raw


def test_deep_nesting_is_garbage_not_a_crash() -> None:
    got = load(b"[" * 100_000, limit=1_000_000)
    assert isinstance(got, Rejected) and got.kind == "garbage"


SPEC: dict[str, tuple[type, ...]] = {"pid": (int,), "at": (int, float), "name": (str,)}
WRONG = "field {name!r} is wrong"


def test_take_keeps_exact_types_in_order() -> None:
    obj = {"pid": 3, "at": 1.5, "name": "n", "extra": []}
    assert take(obj, SPEC, wrong=WRONG) == {"pid": 3, "at": 1.5, "name": "n"}


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        ({"at": 1, "name": "n"}, "field 'pid' is wrong"),
        ({"pid": True, "at": 1, "name": "n"}, "field 'pid' is wrong"),  # a bool is not an int
        ({"pid": None, "at": 1, "name": "n"}, "field 'pid' is wrong"),
        ({"pid": 1, "at": "1", "name": 2}, "field 'at' is wrong"),  # the first problem only
    ],
)
def test_take_names_the_first_wrong_field(obj: dict[str, Any], problem: str) -> None:
    assert take(obj, SPEC, wrong=WRONG) == problem


def test_finite_numbers_only_when_asked() -> None:
    obj = {"pid": 1, "at": float("nan"), "name": "n"}
    assert take(obj, SPEC, wrong=WRONG)["at"] != 0  # type: ignore[index]
    assert take(obj, SPEC, wrong=WRONG, not_finite="{name!r} infinite") == "'at' infinite"


def test_optional_fields_may_be_absent_or_null_but_not_wrong() -> None:
    spec: dict[str, tuple[type, ...]] = {"exit_code": (int,), "at": (int, float)}
    assert take({}, spec, wrong=WRONG, optional=True) == {"exit_code": None, "at": None}
    assert take({"exit_code": None, "at": 2}, spec, wrong=WRONG, optional=True) == {
        "exit_code": None,
        "at": 2,
    }
    assert take({"exit_code": "0"}, spec, wrong=WRONG, optional=True) == (
        "field 'exit_code' is wrong"
    )


def test_take_fills_a_dict_given() -> None:
    values: dict[str, Any] = {"before": 1}
    got = take({"exit_code": 3}, {"exit_code": (int,)}, wrong=WRONG, into=values)
    assert got is values and values == {"before": 1, "exit_code": 3}


def test_null_only_where_a_type_allows_it_and_never_for_a_missing_required_field() -> None:
    spec: dict[str, tuple[type, ...]] = {"head": (str, type(None))}
    assert take({"head": None}, spec, wrong=WRONG) == {"head": None}
    assert take({}, spec, wrong=WRONG) == "field 'head' is wrong"


def test_strings_is_a_list_of_strings_only() -> None:
    assert strings([]) and strings(["a", "b"])
    assert not strings(["a", 1]) and not strings([None])
