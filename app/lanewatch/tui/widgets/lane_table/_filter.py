"""The filter language of a `LaneTable` (k9s / lazygit habits), compiled once per filter text.

- plain text (no term below): a case-insensitive substring of any cell, spaces included (as
  before field filters existed);
- `field:value`: the cell of the column whose key or label is `field` holds `value`; a value
  with `*`, `?` or `[` is a glob on the whole cell (`lane:agent*`);
- `!term`: the inverse of a term (`!state:live`, `!tmp`);
- several terms, separated by spaces, must all hold.

A `field:` that names no column is plain text (paths and hosts may hold colons).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# A row as the filter sees it: each cell's plain text, casefolded.
Cells = Sequence[str]
_GLOB = re.compile(r"[*?\[]")


def _anywhere(needle: str, cells: Cells, scope: Sequence[int]) -> bool:
    # NUL between cells, so a match never spans two cells.
    return needle in "\0".join(cells[i] for i in scope)


@dataclass(frozen=True, slots=True)
class _Term:
    column: int | None  # None: any cell of the scope
    needle: str  # casefolded
    glob: bool
    inverse: bool
    scope: tuple[int, ...]

    def holds(self, cells: Cells) -> bool:
        if self.column is None:
            found = _anywhere(self.needle, cells, self.scope)
        elif self.glob:
            found = fnmatch.fnmatchcase(cells[self.column], self.needle)
        else:
            found = self.needle in cells[self.column]
        return found != self.inverse


def _field(word: str, fields: Mapping[str, int]) -> int | None:
    name, colon, _ = word.partition(":")
    return fields.get(name) if colon else None


def _term(word: str, fields: Mapping[str, int], scope: tuple[int, ...]) -> _Term | None:
    inverse = word.startswith("!")
    body = word[1:] if inverse else word
    column = _field(body, fields)
    if column is None:
        return _Term(None, body, False, inverse, scope) if body else None
    value = body.partition(":")[2]
    return _Term(column, value, bool(_GLOB.search(value)), inverse, scope)


def compile_filter(
    text: str, fields: Mapping[str, int], scope: Sequence[int]
) -> Callable[[Cells], bool] | None:
    """A predicate on a row's casefolded cells; None when `text` filters nothing.

    `fields` maps each column's key and label (casefolded) to its index; plain text looks in
    the cells of `scope` only."""
    needle = text.casefold()
    words = needle.split()
    if not words:
        return None
    where = tuple(scope)
    if not any(w.startswith("!") or _field(w, fields) is not None for w in words):
        # Plain text, as typed (spaces included): a substring of any cell.
        return lambda cells: _anywhere(needle, cells, where)
    terms = [t for t in (_term(w, fields, where) for w in words) if t is not None]
    if not terms:
        return None
    return lambda cells: all(t.holds(cells) for t in terms)
