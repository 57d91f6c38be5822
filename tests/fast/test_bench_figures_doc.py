"""The benchmark's figures (`tests/bench/bench.py` `FIGURES`) are the rows of the figures table
in docs/performance.md, in its order: a figure added to the bench without its row (what it
measures, its floor, its target), or a row without its measure, fails here, long before the slow
smoke run (`tests/journeys/test_bench_smoke.py`, which checks the bench's output against the
same list)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.bench.bench import FIGURES

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
HEADER = "| figure | lanewatch | floor | target |"


def documented_figures(text: str) -> list[str]:
    """The figure named in the first cell of each row of the table under `HEADER`."""
    lines = text.splitlines()
    start = lines.index(HEADER) + 2  # past the header and its |---| line
    names = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        found = re.match(r"\| `([a-z_]+)` \|", line)
        assert found, f"a row of the figures table without a `name`: {line[:60]}"
        names.append(found.group(1))
    return names


def test_the_bench_measures_every_figure_of_the_doc_in_its_order() -> None:
    assert documented_figures(DOC.read_text(encoding="utf-8")) == list(FIGURES)


def test_the_table_is_read_row_by_row_to_its_end() -> None:
    rows = ["| `fence` | a | b | c |", "| `guard` | a | b | c |", "", "| `other` | x |"]
    assert documented_figures("\n".join(["text", "", HEADER, "|---|---|---|---|", *rows])) == [
        "fence",
        "guard",
    ]
