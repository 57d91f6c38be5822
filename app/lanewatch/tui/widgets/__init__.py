"""Widgets of the lanewatch dashboard."""

from lanewatch.tui.widgets.lane_table import (
    Column,
    LaneTable,
    duration_key,
    number_key,
    sparkline,
    text_key,
)

__all__ = ["Column", "LaneTable", "duration_key", "number_key", "sparkline", "text_key"]
