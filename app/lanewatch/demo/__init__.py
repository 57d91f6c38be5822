"""`lanewatch demo`: a self-contained demo root with real simulated lanes.

`DemoScenario` builds it (`scenario.py`); `writer.py` is what its lanes run, `intruder.py` its
takeover, `procs.py` how processes are started and stopped, `disk.py` its files. Names are
imported lazily so that running one of the demo's programs stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lanewatch.demo.procs import DemoError
    from lanewatch.demo.scenario import DemoScenario, Expectation

__all__ = ["DemoError", "DemoScenario", "Expectation"]
_HOME = {"DemoError": "procs", "DemoScenario": "scenario", "Expectation": "scenario"}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"lanewatch.demo.{_HOME[name]}"), name)
    raise AttributeError(f"module 'lanewatch.demo' has no attribute {name!r}")
