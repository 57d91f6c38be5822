"""lanewatch: per-lane scratch namespaces for parallel agents, watched live."""

from __future__ import annotations

from lanewatch.lanes.lane import Lane, scratch_dir_for
from lanewatch.proof.gate import check_gate
from lanewatch.proof.receipts import write_receipt

__version__ = "0.1.0"

__all__ = ["Lane", "__version__", "check_gate", "scratch_dir_for", "write_receipt"]
