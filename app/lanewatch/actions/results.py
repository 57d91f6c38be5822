"""What every action gives back: a typed outcome with one line for people.

Actions never raise for an expected outcome (refused, already gone): they return a result.
Callers that prefer an exception for a refusal (the dashboard's adapter maps exceptions to a
failed outcome) pass `check=True`, and a refusal raises `ActionRefused` carrying the result.
"""

from __future__ import annotations

from typing import TypeVar

from lanewatch.errors import LanewatchError
from lanewatch.model.engine_api import Result
from lanewatch.model.units import size

__all__ = ["ActionRefused", "Result", "checked", "human_size", "sizes_text"]


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
    """Bytes as the dashboard shows them (`model.units.size`: decimal, `1.2kB`); `?` unknown."""
    return "?" if n is None else size(n)


def sizes_text(allocated: int | None, apparent: int | None) -> str:
    """`28MB on disk (449kB of data)`: what a clear frees first, the files' lengths beside."""
    if allocated is None:
        return human_size(apparent)
    return f"{human_size(allocated)} on disk ({human_size(apparent)} of data)"
