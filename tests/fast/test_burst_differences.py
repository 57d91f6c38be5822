"""The benchmark's burst figure keeps its differences when the picture never matched the disk
(one miss in 27 runs left nothing to explain it). Pure: no benchmark is run."""

from __future__ import annotations

import json

from tests.bench.fig_burst import describe, differences


def test_a_miss_keeps_every_difference_and_says_its_gist() -> None:
    want = {"/r/a": ("live", 3, 10), "/r/b": ("stale", 1, 1), "/r/c": ("live", 0, 0)}
    got = {"/r/a": ("live", 2, 10), "/r/b": ("live", 1, 1), "/r/d": ("live", 0, 0)}
    diff = differences(want, got)
    assert (diff["missing"], diff["extra"], diff["wrong"], diff["wrong_states"]) == (1, 1, 2, 1)
    assert diff["all"]["missing"] == {"/r/c": ("live", 0, 0)}
    assert diff["all"]["extra"] == {"/r/d": ("live", 0, 0)}
    assert diff["all"]["wrong"]["/r/b"] == {"want": ("stale", 1, 1), "got": ("live", 1, 1)}
    json.dumps(diff)  # it travels in the figure's JSON
    line = describe(diff)
    assert line.startswith("2 wrong (1 in state), 1 missing, 1 extra, e.g. /r/a")
