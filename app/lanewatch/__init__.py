"""lanewatch: per-lane scratch namespaces for parallel agents, watched live."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
