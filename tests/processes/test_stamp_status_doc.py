"""docs/engine.md lists every `stamp_status` that `status --json` can emit (`fifo`,
`directory`, `socket` and `device` were missing): the doc line is the enum."""

from __future__ import annotations

import re
from pathlib import Path

import lanewatch
from lanewatch.lanes.stamp import StampStatus

DOCS = Path(lanewatch.__file__).parents[2] / "docs" / "engine.md"


def test_the_doc_lists_every_stamp_status() -> None:
    (listed,) = re.findall(r'"stamp_status": "([^"]+)"', DOCS.read_text())
    assert listed.split("|") == [s.value for s in StampStatus]
