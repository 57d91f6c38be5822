"""One unit convention for sizes: the CLI's messages (clear, purge, trash) and the dashboard
both say decimal kB/MB, never KiB."""

from __future__ import annotations

from lanewatch.actions.results import human_size
from lanewatch.model.units import size


def test_action_messages_use_the_dashboards_units() -> None:
    for n in (0, 999, 1000, 1234, 65536, 12_345_678, 10**13):
        assert human_size(n) == size(n)
    assert human_size(65536) == "66kB" and human_size(12) == "12B"
    assert human_size(None) == "?"


def test_no_binary_units_anywhere() -> None:
    for n in (1024, 1024**2, 1024**3):
        assert "i" not in human_size(n)
