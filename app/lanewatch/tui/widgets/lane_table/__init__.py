"""`LaneTable`: a virtualised, keyed table for thousands of live rows, and what its columns use.

One private module per idea: `_table` (the widget: rows by key, order, filter, cursor, marks,
rendering), `_column` (row keys, cells, `Column`), `_deferred` (changed rows whose cells wait),
`_sort_keys`, `_cells` (a cell made inert, measured and fitted), `_sparkline`. Import from here.
"""

from lanewatch.tui.widgets.lane_table._column import Cell, Column, Justify, RowKey, SortKey, plain
from lanewatch.tui.widgets.lane_table._deferred import RowSource
from lanewatch.tui.widgets.lane_table._sort_keys import duration_key, number_key, text_key
from lanewatch.tui.widgets.lane_table._sparkline import sparkline
from lanewatch.tui.widgets.lane_table._table import LaneTable

__all__ = [
    "Cell",
    "Column",
    "Justify",
    "LaneTable",
    "RowKey",
    "RowSource",
    "SortKey",
    "duration_key",
    "number_key",
    "plain",
    "sparkline",
    "text_key",
]
