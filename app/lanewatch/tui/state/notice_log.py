"""Notices that never block: every notice is kept whole in a message log (`m` shows it, as
lazygit's command log), and its toast is one line, cut to the toast's width, ending in
"m: log" when the log has more. A notice that comes while a dialog is open waits until the
dialog closes (a toast never covers a dialog's buttons); one that was showing when a dialog
opened is taken off the screen (the log keeps it). Pure, apart from `NoticeLog` holding
the notices."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size

TOAST_WIDTH = 60  # Textual's toast: 60 cells, at most half the screen
TOAST_CHROME = 6  # its border, its padding of one each side, the rack's margins (measured)
MORE = " · m: log"
KEEP = 500  # notices the log keeps (the oldest go first)


@dataclass(frozen=True, slots=True)
class Notice:
    """One notice, whole (as the screens gave it; inert already)."""

    time: float
    title: str
    message: str
    severity: str
    timeout: float | None = None


def toast_budget(screen_width: int) -> int:
    """The cells of text one toast line holds on a screen this wide."""
    return max(12, min(TOAST_WIDTH, screen_width // 2) - TOAST_CHROME)


def one_line(title: str, message: str, budget: int) -> str:
    """Title and message on one line of at most `budget` cells, ending in "· m: log" when
    something was left for the log (a second line, or the rest of a long one)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    line = f"{title}: {first}" if title and first else title or first
    if len(lines) <= 1 and cell_len(line) <= budget:
        return line
    room = max(1, budget - cell_len(MORE) - 1)
    if cell_len(line) > room:
        line = set_cell_size(line, room).rstrip() + "…"
    return line + MORE


class NoticeLog:
    """The message log: every notice of the app's life, the newest last (at most `KEEP`),
    and those waiting for a dialog to close."""

    def __init__(self) -> None:
        self.notices: list[Notice] = []
        self.held: list[Notice] = []

    def add(self, notice: Notice) -> None:
        self.notices.append(notice)
        del self.notices[:-KEEP]

    def hold(self, notice: Notice) -> None:
        self.held.append(notice)

    def release(self, now: float) -> list[Notice]:
        """The held notices still worth a toast (their timeout not run out while they
        waited), oldest first; the log has them all either way."""
        held, self.held = self.held, []
        return [n for n in held if n.timeout is None or now - n.time < n.timeout]
