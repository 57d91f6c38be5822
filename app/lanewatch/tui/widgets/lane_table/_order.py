"""Which rows of a `LaneTable` show, in which order: the sort (stable, by a column's sort key),
the filter (`_filter.py`, compiled once per text), and each shown row's display position. Plain
data; no Textual."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from lanewatch.tui.widgets.lane_table._column import Cell, Column, RowKey, plain
from lanewatch.tui.widgets.lane_table._filter import compile_filter
from lanewatch.tui.widgets.lane_table._sort_keys import text_key


def nearest(keys: list[RowKey], key: RowKey, accept: Callable[[RowKey], bool]) -> RowKey | None:
    """The first accepted key after `key` in `keys`, else the last accepted one before it."""
    try:
        start = keys.index(key)
    except ValueError:
        return None
    for candidate in keys[start + 1 :]:
        if accept(candidate):
            return candidate
    for candidate in reversed(keys[:start]):
        if accept(candidate):
            return candidate
    return None


class RowOrder:
    """The rows by key, and the order they show in. Owned by a `LaneTable`."""

    def __init__(self, columns: tuple[Column, ...]) -> None:
        self.columns = columns
        self.column_index = {column.key: i for i, column in enumerate(columns)}
        self.rows: dict[RowKey, tuple[Cell, ...]] = {}
        self.sort_column: str | None = None
        self.sort_reverse = False
        self.sort_keys: dict[RowKey, Any] = {}
        self.filter_text = ""  # as the user typed it
        self.predicate: Callable[[Sequence[str]], bool] | None = None  # None: no filter
        self.filter_columns: tuple[int, ...] = tuple(range(len(columns)))
        self.ordered: list[RowKey] = []  # every row, sorted
        self.visible: list[RowKey] = []  # the rows that pass the filter, in order
        self.position: dict[RowKey, int] = {}  # key -> index in visible
        self.haystacks: dict[RowKey, tuple[str, ...]] = {}  # casefolded cells per row

    def sort_key(self, index: int, row: tuple[Cell, ...]) -> Any:
        key = self.columns[index].sort_key or text_key
        return key(row[index])

    def sort(self) -> None:
        # `sorted` is stable with reverse=True too; sorting from insertion order makes ties
        # keep their insertion order rather than the previous sort's.
        self.ordered = sorted(self.rows, key=self.sort_keys.__getitem__, reverse=self.sort_reverse)

    def set_sort(self, column: str | None, reverse: bool) -> bool:
        """Sort by a column (None: insertion order); False if it already was."""
        if column is not None and column not in self.column_index:
            raise KeyError(column)
        if (column, reverse) == (self.sort_column, self.sort_reverse):
            return False
        self.sort_column, self.sort_reverse = column, reverse
        self.sort_keys.clear()
        if column is None:
            self.ordered = list(self.rows)
        else:
            index = self.column_index[column]
            for key, row in self.rows.items():
                self.sort_keys[key] = self.sort_key(index, row)
            self.sort()
        return True

    def set_filter(self, text: str, columns: Iterable[str] | None) -> bool:
        """Filter by `text` over `columns` (None: all); False if it already was."""
        indices = (
            tuple(range(len(self.columns)))
            if columns is None
            else tuple(self.column_index[c] for c in columns)
        )
        if (text, indices) == (self.filter_text, self.filter_columns):
            return False
        self.filter_text, self.filter_columns = text, indices
        fields = {c.key.casefold(): i for i, c in enumerate(self.columns)}
        fields.update((c.label.casefold(), i) for i, c in enumerate(self.columns) if c.label)
        self.predicate = compile_filter(text, fields, indices)
        return True

    def still_in_order(self, keys: Iterable[RowKey]) -> bool:
        """Whether rows whose sort keys changed still sit where a fresh sort puts them: strictly
        between their neighbours. Ages sorted on all move on together, so a tick rarely moves a
        row; this spares the sort and the repaint of every line. A tie, or a filter, answers
        False: the full sort orders ties by insertion."""
        if self.predicate is not None:
            return False
        ordered, position, sort_keys = self.ordered, self.position, self.sort_keys
        before = operator.gt if self.sort_reverse else operator.lt
        for key in keys:
            i = position.get(key)
            if i is None or i >= len(ordered) or ordered[i] != key:
                return False
            mine = sort_keys[key]
            if i > 0 and not before(sort_keys[ordered[i - 1]], mine):
                return False
            if i + 1 < len(ordered) and not before(mine, sort_keys[ordered[i + 1]]):
                return False
        return True

    def matches(self, key: RowKey) -> bool:
        haystack = self.haystacks.get(key)
        if haystack is None:
            haystack = tuple(plain(cell).casefold() for cell in self.rows[key])
            self.haystacks[key] = haystack
        return self.predicate is None or self.predicate(haystack)

    def refilter(self) -> None:
        """The shown rows and their positions, from the sorted ones."""
        if self.predicate is not None:
            self.visible = [key for key in self.ordered if self.matches(key)]
        else:
            self.visible = self.ordered
        self.position = {key: i for i, key in enumerate(self.visible)}

    def forget(self, gone: set[RowKey]) -> None:
        for key in gone:
            del self.rows[key]
            self.haystacks.pop(key, None)
            self.sort_keys.pop(key, None)
        self.ordered = [key for key in self.ordered if key not in gone]
