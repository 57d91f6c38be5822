"""How a detector declares what it does: the kind it emits and the fact it reads. Pure.

A detector is a pure function of `model/detectors/`, marked `@detects(KIND, reads=FactType)`
(`model/facts.py` holds the fact types). The registry (`model/kinds.py`) lists each detector
under its kind; an intake hands every fact it learns to `kinds.detect(fact)`, which runs the
detectors that read that type of fact. A fact's fields are its detectors' parameters, passed by
name: `detect` and a test call a detector alike, and a second detector of one fact takes the
fields it needs and `**_` for the rest (`tests/processes/test_kinds.py` binds each to its fact).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, Generic, ParamSpec, TypeVar

from lanewatch.model.observation import Observation

P = ParamSpec("P")
R = TypeVar("R", bound="Observation | Sequence[Observation] | None")


class Detector(Generic[P, R]):
    """A detector function with its declaration; calling it calls the function."""

    def __init__(self, kind: str, reads: type, run: Callable[P, R]) -> None:
        self.kind = kind  # the name of the kind it emits (`model/kinds.py`)
        self.reads = reads  # the type of fact it reads (`model/facts.py`)
        self.run = run
        self._by_name: Callable[..., R] = run
        self._fields = tuple(f.name for f in fields(reads))
        functools.update_wrapper(self, run)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.run(*args, **kwargs)

    def on(self, fact: object) -> list[Observation]:
        """What it finds in `fact` (one of its `reads` type): none, one or many observations."""
        found = self._by_name(**{name: getattr(fact, name) for name in self._fields})
        if found is None:
            return []
        return [found] if isinstance(found, Observation) else list(found)


def detects(kind: str, *, reads: type) -> Callable[[Callable[P, R]], Detector[P, R]]:
    """Declare a detector: the kind it emits, the type of fact it reads."""

    def declare(run: Callable[P, R]) -> Detector[P, R]:
        return Detector(kind, reads, run)

    return declare


AnyDetector = Detector[..., Any]
