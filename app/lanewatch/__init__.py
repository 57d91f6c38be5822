"""lanewatch: per-lane scratch namespaces for parallel agents, watched live."""

from __future__ import annotations

from importlib import import_module

# Not `typing.TYPE_CHECKING`: importing typing costs a hook (`lanewatch guard`, run before every
# tool call of an agent) and every pytest session milliseconds; type checkers know this idiom.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from lanewatch.lanes.lane import Lane, scratch_dir_for
    from lanewatch.proof.gate import check_gate
    from lanewatch.proof.receipts import write_receipt

__version__ = "0.4.17"

__all__ = ["Lane", "__version__", "check_gate", "scratch_dir_for", "write_receipt"]

# Loaded on first use: pytest imports this package for its plugin (lanewatch.pytest_plugin) in
# every session where lanewatch is installed, asked for or not, so importing it must cost nothing.
_LAZY = {
    "Lane": "lanewatch.lanes.lane",
    "scratch_dir_for": "lanewatch.lanes.lane",
    "check_gate": "lanewatch.proof.gate",
    "write_receipt": "lanewatch.proof.receipts",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lanewatch' has no attribute {name!r}")
    return getattr(import_module(module), name)
