"""The rows of a table that wait for their cells (`lane_table/_deferred.py`) catch up a few at
a time, the oldest first, once they have waited long enough: a busy table's rows off screen are
built over many short turns of the UI's loop, not in one long one. `DeferredRows` is plain data;
the table it fills is a stand-in with the four things it uses of `LaneTable`."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from types import SimpleNamespace

from lanewatch.tui.widgets.lane_table import Cell, RowKey
from lanewatch.tui.widgets.lane_table._deferred import DeferredRows


class Table:
    """What `DeferredRows` uses of `LaneTable`: its rows, its window, `apply`, `set_tones`."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.order = SimpleNamespace(rows={key: ("old",) for key in keys})
        self.in_view: list[RowKey] = []
        self.batches: list[list[RowKey]] = []

    def window(self, margin: int) -> list[RowKey]:
        return self.in_view

    def apply(
        self, upserts: Mapping[RowKey, tuple[Cell, ...]], removals: Iterable[RowKey] = ()
    ) -> None:
        self.batches.append(list(upserts))
        self.order.rows.update(upserts)

    def set_tones(self, tones: Mapping[RowKey, str | None]) -> None:
        pass


def source(keys: Collection[RowKey]) -> tuple[dict[RowKey, tuple[Cell, ...]], dict]:
    return {key: ("new",) for key in keys}, {}


def waiting(now: list[float], keys: Iterable[str]) -> tuple[Table, DeferredRows]:
    table = Table(f"r{i}" for i in range(10))
    rows = DeferredRows(table, clock=lambda: now[0])  # type: ignore[arg-type]
    rows.add(keys, source)
    return table, rows


def test_rows_are_built_only_once_they_have_waited_and_a_few_at_a_time_oldest_first() -> None:
    now = [100.0]
    table, rows = waiting(now, ["r3", "r1"])
    now[0] = 100.5
    rows.add(["r2", "r1"], source)  # r1 changed again: it keeps its place (since 100.0)
    rows.build_due(1.0, 8)
    assert table.batches == []  # none has waited a second

    now[0] = 101.0
    rows.build_due(1.0, 1)
    assert table.batches == [["r3"]]  # the oldest, and only one
    rows.build_due(1.0, 8)
    assert table.batches == [["r3"], ["r1"]]  # r2 has waited only half a second
    assert list(rows.keys) == ["r2"]
    assert table.order.rows["r1"] == ("new",) and table.order.rows["r2"] == ("old",)

    now[0] = 101.5
    rows.build_due(1.0, 8)
    assert not rows.keys and table.order.rows["r2"] == ("new",)


def test_a_row_built_another_way_waits_anew_from_its_next_change() -> None:
    now = [100.0]
    table, rows = waiting(now, ["r5"])
    rows.build(["r5"])  # seen or read before its turn (`get_row`, a scroll)
    now[0] = 100.9
    rows.add(["r5"], source)
    now[0] = 101.5
    rows.build_due(1.0, 8)
    assert table.batches == [["r5"]]  # only the first build: its new wait began at 100.9
    now[0] = 102.0
    rows.build_due(1.0, 8)
    assert table.batches == [["r5"], ["r5"]]


def test_rows_given_whole_or_removed_no_longer_wait() -> None:
    now = [100.0]
    table, rows = waiting(now, ["r1", "r2", "r12"])  # r12 is no row of the table
    assert list(rows.keys) == ["r1", "r2"]
    rows.discard(["r1"])
    now[0] = 200.0
    rows.build_due(1.0, 8)
    assert table.batches == [["r2"]]
