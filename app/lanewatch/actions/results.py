"""What every action gives back: a typed outcome with one line for people.

Actions never raise for an expected outcome (refused, already gone): they return a result.
Callers that prefer an exception for a refusal (the dashboard's adapter maps exceptions to a
failed outcome) pass `check=True`, and a refusal raises `ActionRefused` carrying the result.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from lanewatch.errors import LanewatchError


class Result(Protocol):
    @property
    def ok(self) -> bool: ...

    @property
    def message(self) -> str: ...


class ActionRefused(LanewatchError):
    """An action refused; `result` is the typed result, `str()` its message."""

    def __init__(self, result: Result) -> None:
        super().__init__(result.message)
        self.result = result


R = TypeVar("R", bound=Result)


def checked(result: R, check: bool) -> R:
    """Return `result`, or raise ActionRefused if `check` and it is not ok."""
    if check and not result.ok:
        raise ActionRefused(result)
    return result


def human_size(n: int | None) -> str:
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # unreachable
